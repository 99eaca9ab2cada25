"""The client's checks of a ServerHello and a HelloRetryRequest against what it offered.

Pure functions of the hello and the offer (config, ClientHellos sent, key shares); each
broken rule raises engine.verdict.Refusal naming the RFC rule, and ClientHandshake, which
owns the handshake's state, sends the alert. Split from engine.client so that the state
machine reads as its transitions and these read as the rules.
"""

from __future__ import annotations

from collections.abc import Collection

from tlsprobe import kex, registry
from tlsprobe.engine import extcheck
from tlsprobe.engine.common import (
    ILLEGAL_PARAMETER,
    TLS12,
    TLS13,
    UNEXPECTED_MESSAGE,
    is_tls13,
    message_label,
)
from tlsprobe.engine.config import ClientConfig
from tlsprobe.engine.suites import suite_params
from tlsprobe.engine.verdict import Refusal
from tlsprobe.errors import FailureKind
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import AlertEvent, Event, MessageEvent
from tlsprobe.wire.hello import HELLO_RETRY_REQUEST_RANDOM, ClientHello, ServerHello

MISSING_EXTENSION = 109
PROTOCOL_VERSION = 70
SUPPORTED_VERSIONS = 43


def check_choice(sh: ServerHello, offered: ClientHello, versions: tuple[int, ...]) -> None:
    """The cipher suite (of a ServerHello or an HRR) was offered and is defined for the
    version the hello selects, and the compression method was offered. Each is a protocol
    violation named with its RFC rule; the engine checks them before it takes the hello for
    the server's answer (ClientHandshake._server_hello), so a scan never counts such a hello
    as an answer to its question. A ServerHello selecting a version not among `versions` (not
    offered) is left to check_server_hello, which names that first: the hello is the
    server's answer (a TLS 1.2 server ignoring supported_versions says so), and its suite is
    not judged by a version the client never asked for."""
    version = TLS13 if sh.is_hello_retry_request else sh.selected_version
    if version not in versions:
        return
    problem = choice_problem(version, sh.is_hello_retry_request, sh.cipher_suite,
                             sh.legacy_compression_method, offered.cipher_suites,
                             offered.legacy_compression_methods)
    if problem is not None:
        raise Refusal(ILLEGAL_PARAMETER, problem)


def choice_problem(version: int, hrr: bool, suite: int, compression: int,
                   offered_suites: Collection[int], offered_compressions: Collection[int]
                   ) -> str | None:
    """The rule of `check_choice` as a pure function of the hello's fields and the offer,
    shared with the capture reader (offline.facts): the protocol violation named with its
    RFC rule, or None. `version`: the version the hello selects (TLS 1.3 for an HRR),
    one the client offered."""
    rule = "RFC 8446 4.1.3" if is_tls13(version) else "RFC 5246 7.4.1.3"
    if suite not in offered_suites:
        return (f"server chose cipher suite {registry.suite_label(suite)} which was not "
                f"offered (protocol violation, {rule}: the server selects from the client's "
                "list)")
    params = suite_params(suite)
    if params is not None and params.tls13 != is_tls13(version):
        what = "a TLS 1.3" if params.tls13 else "a TLS 1.2 (or earlier)"
        rule = "TLS 1.3 cipher suites cannot be used for TLS 1.2" if params.tls13 else \
            "cipher suites for TLS 1.2 and lower cannot be used with TLS 1.3"
        hello = "HelloRetryRequest" if hrr else f"{registry.version_name(version)} ServerHello"
        return (f"{hello} chose {registry.suite_label(suite)}, {what} cipher suite "
                f"(protocol violation, RFC 8446 B.4: {rule})")
    if compression not in offered_compressions:
        method = {1: " (DEFLATE)", 64: " (LZS)"}.get(compression, "")
        return f"server chose compression method {compression}{method}, which was not offered"
    return None


def check_offered_version(sh: ServerHello, config: ClientConfig, offered: ClientHello) -> None:
    """The version a ServerHello selects was offered. A hello that breaks this is still the
    server's answer (a server without the version asked for names the one it has). Named in
    legacy_version, at most the hello's, it is TLS 1.0-1.2 negotiation (RFC 5246 E.1: the
    server answers with the highest version it has, the client ends with protocol_version
    when that is none it offers): no version in common, a refusal, no broken rule."""
    version = sh.selected_version
    if version in config.versions:
        return
    name = registry.version_name(version)
    if sh.extension(SUPPORTED_VERSIONS) is None and version <= offered.legacy_version:
        spoken = ", ".join(registry.version_name(v) for v in sorted(config.versions,
                                                                    reverse=True))
        raise Refusal(PROTOCOL_VERSION, f"server chose {name}, which the hello does not offer "
                      f"(it offers {spoken}): no version in common", FailureKind.REFUSED)
    raise Refusal(ILLEGAL_PARAMETER, f"server chose {name}, which was not offered")


def check_server_hello(sh: ServerHello, config: ClientConfig, offered: ClientHello,
                       hrr: ServerHello | None) -> None:
    """A ServerHello (not an HRR): version offered, its extensions (the suite for the version:
    check_choice), downgrade sentinel, and for TLS 1.3 the legacy fields and agreement with the HRR."""
    version = sh.selected_version
    check_offered_version(sh, config, offered)
    extcheck.check_extensions(offered, config.alpn,
                              extcheck.SH13 if is_tls13(version) else extcheck.SH12,
                              sh.extensions)
    sentinel = sh.downgrade_sentinel
    # the versions of the RFCs: not a TLS 1.3 draft (0x7fNN), experiment (0x7eNN) or GREASE
    # value; the drafts (16 to 28, 4.1.3) say implementations of draft versions SHOULD NOT
    # check the sentinel ("a pre-RFC client connecting to RFC servers ... will appear to
    # downgrade to TLS 1.2"): a TLS 1.3 server marks its TLS 1.2 answer to such a client
    offered_max = max((v for v in config.versions if v >> 8 == 0x03), default=0)
    if sentinel is not None and version < TLS13 and (
            (sentinel == TLS12 and offered_max >= TLS13) or
            (sentinel == 0x0302 and version < TLS12 and offered_max >= TLS12)):
        raise Refusal(ILLEGAL_PARAMETER, f"ServerHello.random carries the downgrade sentinel "
                      f"for {registry.version_name(sentinel)} although a higher version was "
                      "offered (RFC 8446 4.1.3)")
    if is_tls13(version):
        extcheck.check_legacy_version(sh)
        if sh.legacy_session_id_echo != offered.legacy_session_id:
            raise Refusal(ILLEGAL_PARAMETER, "TLS 1.3 ServerHello does not echo the "
                          "legacy_session_id")
        if hrr is not None and sh.cipher_suite != hrr.cipher_suite:
            raise Refusal(ILLEGAL_PARAMETER, "ServerHello cipher suite differs from the "
                          "HelloRetryRequest's")


def tls13_share(sh: ServerHello, hrr: ServerHello | None, offered: ClientHello,
                shares: dict[int, kex.KeyShare]) -> tuple[int, kex.KeyShare, bytes] | str:
    """The server's group, our key share for it and the server's key, or why the
    engine cannot compute the secret (an offer-only group): the handshake stops there."""
    share = sh.key_share
    if share is None:
        raise Refusal(MISSING_EXTENSION, "TLS 1.3 ServerHello without key_share (PSK-only "
                      "resumption was not offered)")
    group, key = share
    if hrr is not None and hrr.hrr_selected_group not in (None, group):
        raise Refusal(ILLEGAL_PARAMETER, f"ServerHello key share for "
                      f"{registry.group_label(group)}, the HelloRetryRequest asked for "
                      f"{registry.group_label(hrr.hrr_selected_group or 0)}")
    mine = shares.get(group)
    if mine is None:
        if group in offered.supported_groups and \
                any(e.group == group for e in offered.key_shares):
            return f"{registry.group_label(group)} cannot be computed here"
        raise Refusal(ILLEGAL_PARAMETER, f"server answered with a key share for "
                      f"{registry.group_label(group)}, for which the client sent no share")
    return group, mine, key


def check_hello_retry_form(hrr: ServerHello, config: ClientConfig,
                           offered: ClientHello) -> None:
    """A HelloRetryRequest's extensions and legacy_version."""
    extcheck.check_extensions(offered, config.alpn, extcheck.HRR, hrr.extensions)
    extcheck.check_legacy_version(hrr)


def check_hello_retry_change(hrr: ServerHello, config: ClientConfig,
                             shares: dict[int, kex.KeyShare]) -> None:
    """A HelloRetryRequest changes something the client can do: it asks for a group
    offered without a share, or sends a cookie."""
    group = hrr.hrr_selected_group
    if group is None and hrr.extension(44) is None:
        raise Refusal(ILLEGAL_PARAMETER, "HelloRetryRequest that changes nothing "
                      "(no group, no cookie)")
    if group is not None:
        if group not in config.offered_groups():
            raise Refusal(ILLEGAL_PARAMETER, f"HelloRetryRequest asks for "
                          f"{registry.group_label(group)}, which was not offered")
        if group in shares or group in config.share_groups():
            raise Refusal(ILLEGAL_PARAMETER, f"HelloRetryRequest asks for "
                          f"{registry.group_label(group)}, for which a share was already "
                          "sent")


def second_hello(sh: ServerHello, server_hello: ServerHello | None,
                 hrr: ServerHello | None) -> None:
    """At most one HelloRetryRequest, then one ServerHello."""
    if sh.is_hello_retry_request:
        if hrr is not None:
            raise Refusal(UNEXPECTED_MESSAGE, "server sent a second HelloRetryRequest")
        if server_hello is not None:
            raise Refusal(UNEXPECTED_MESSAGE, "HelloRetryRequest after ServerHello")
    elif server_hello is not None:
        raise Refusal(UNEXPECTED_MESSAGE, "server sent a second ServerHello")


def event_label(ev: Event) -> str:
    """What a server event is called in a verdict on it (a HelloRetryRequest by its name)."""
    if isinstance(ev, MessageEvent):
        if ev.msg_type == HandshakeType.server_hello and \
                ev.raw[6:38] == HELLO_RETRY_REQUEST_RANDOM:
            return "HelloRetryRequest"
        return message_label(ev.msg_type)
    if isinstance(ev, AlertEvent):
        return "alert"
    return "record"
