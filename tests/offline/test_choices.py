"""offline.choices.choice_problem: the live probe's suite rule on a capture's hello
summaries, at its edges (the recorded scripted servers cover the whole path:
tests/hostile/test_pcap_violation.py)."""

from __future__ import annotations

from tlsprobe.offline.choices import choice_problem
from tlsprobe.wire.hello_fields import ClientHelloInfo, ServerHelloInfo

SV, KS = 43, 51
SUITES = (0x1301, 0xC02B, 0xC02F)


def client(versions: tuple[int, ...] = (), legacy: int = 0x0303, **more: object) -> ClientHelloInfo:
    return ClientHelloInfo(legacy, bytes(32), b"", SUITES, b"\x00",
                           (SV, KS) if versions else (KS,), supported_versions=versions,
                           **more)  # type: ignore[arg-type]


def server(suite: int, version: int, legacy: int = 0x0303, ext: bool = True) -> ServerHelloInfo:
    return ServerHelloInfo(legacy, bytes(32), b"", suite, 0, (SV, KS) if ext else (), version)


def test_tls13_suite_in_tls12_is_named_as_the_probe_names_it() -> None:
    problem = choice_problem(server(0x1301, 0x0303, ext=False), client((0x0304, 0x0303)),
                             False)
    assert problem == ("TLS 1.2 ServerHello chose TLS_AES_128_GCM_SHA256 (0x1301), a TLS 1.3 "
                       "cipher suite (protocol violation, RFC 8446 B.4: TLS 1.3 cipher suites "
                       "cannot be used for TLS 1.2)")


def test_dtls_versions_are_judged_as_their_tls_counterparts() -> None:
    """DTLS 1.2 (0xfefd) choosing a TLS 1.3 suite is the same violation; a DTLS 1.2 hello
    carries no supported_versions and is judged all the same."""
    problem = choice_problem(server(0x1301, 0xFEFD, 0xFEFD, ext=False),
                             client(legacy=0xFEFD), True)
    assert problem is not None and "a TLS 1.3 cipher suite" in problem
    assert choice_problem(server(0xC02B, 0xFEFD, 0xFEFD, ext=False), client(legacy=0xFEFD),
                          True) is None


def test_tls13_draft_in_the_legacy_version_field_is_not_judged_by_the_rfc() -> None:
    """A TLS 1.3 draft (draft 14: 0x0304 in the legacy fields, no supported_versions, TLS 1.2
    suites as suricata-verify's tls13_draft14.pcap shows) is not an RFC 8446 violation."""
    assert choice_problem(server(0xC02B, 0x0304, 0x0304, ext=False), client(legacy=0x0304),
                          False) is None
    named = choice_problem(server(0xC02B, 0x0304), client((0x0304,)), False)
    assert named is not None and "a TLS 1.2 (or earlier) cipher suite" in named


def test_a_version_not_offered_or_a_partial_hello_is_not_judged_here() -> None:
    assert choice_problem(server(0x1301, 0x0302, 0x0302, ext=False), client((0x0304, 0x0303)),
                          False) is None
    assert choice_problem(server(0x1301, 0x0303, ext=False),
                          client((0x0304, 0x0303), partial=True), False) is None


def test_suite_not_offered() -> None:
    problem = choice_problem(server(0x0004, 0x0303, ext=False), client((0x0303,)), False)
    assert problem is not None and "which was not offered (protocol violation, RFC 5246 " \
        "7.4.1.3" in problem
