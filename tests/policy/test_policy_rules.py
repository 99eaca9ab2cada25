"""The policy's rules as data (policy/findings.py POLICY_RULES, issue 31 item 6): each rule
is a small function, `evaluate` is their findings in order (tests/golden pins the texts and
the order), and DH sizes come from the group table, not from group names."""
from __future__ import annotations

import dataclasses

from tlsprobe import registry
from tlsprobe.kex.ffdhe_primes import FFDHE_GROUPS
from tlsprobe.model.audit import AuditReport, DheAudit, GroupAudit, VersionSupport
from tlsprobe.model.probe import Codepoint
from tlsprobe.policy.findings import POLICY_RULES, evaluate
from tlsprobe.policy.load import load_policy


def test_ffdhe_sizes_are_the_primes_sizes() -> None:
    """The registry's sizes of the RFC 7919 groups are those of kex's primes, for every
    finite field group of the registry; no other group has one."""
    assert {code: registry.ffdhe_bits(code) for code in FFDHE_GROUPS} == \
        {code: prime.bit_length() for code, (_name, prime) in FFDHE_GROUPS.items()}
    ffdhe = {g.code for g in registry.all_groups() if g.kind == "ffdhe"}
    assert ffdhe == set(FFDHE_GROUPS)
    assert [registry.ffdhe_bits(c) for c in (0x001D, 0x11EC, 0x0105, 0x01FF)] == [None] * 4


def _tls12_dhe(*negotiated: Codepoint) -> AuditReport:
    v12 = Codepoint.version(0x0303)
    return AuditReport("127.0.0.1", 443, versions=(VersionSupport(v12, "supported"),),
                       groups=(GroupAudit(v12, True, "server_key_exchange",
                                          dhe=DheAudit("negotiated", negotiated=negotiated)),))


def test_dh_sizes_come_from_the_group_not_its_name() -> None:
    """A negotiated ffdhe group is sized by its codepoint: a codepoint whose display name is
    not "ffdheNNNN" (a report read back from an older tool, a renamed group) is still
    3072 bits, and a name that looks like a size but is no RFC 7919 group gives none.
    (Before, the size was int(name[5:]): the first was ignored, the second read as 1024.)"""
    policy = dataclasses.replace(load_policy("intermediate"), dh_min_bits=4096)
    renamed = Codepoint(0x0101, "0x0101", "FFDHE-3072")
    found = [f for f in evaluate(_tls12_dhe(renamed), policy) if f.code == "dh.too_small"]
    assert [(f.message, f.items) for f in found] == [
        ("DHE with a 3072-bit prime (policy minimum 4096)", ("FFDHE-3072",))]
    lookalike = Codepoint(0x01FF, "0x01ff", "ffdhe1024")
    assert not [f for f in evaluate(_tls12_dhe(lookalike), policy) if f.code == "dh.too_small"]


def test_evaluate_is_the_rules_in_order() -> None:
    """`evaluate` adds nothing of its own: its findings are each rule's, in POLICY_RULES'
    order."""
    report = dataclasses.replace(
        _tls12_dhe(Codepoint.group(0x0100)),
        versions=tuple(VersionSupport(Codepoint.version(v), s) for v, s in
                       ((0x0304, "not_supported"), (0x0303, "supported"),
                        (0x0301, "supported"))))
    policy = dataclasses.replace(load_policy("intermediate"), dh_min_bits=3072)
    found = evaluate(report, policy)
    assert [f.code for f in found] == ["version.not_allowed", "version.missing",
                                       "dh.too_small"]
    assert found == [f for rule in POLICY_RULES for f in rule(report, policy)]
