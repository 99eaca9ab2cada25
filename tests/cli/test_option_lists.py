"""List options given a value twice, in every command that sends or runs what they list.

A repeat in a ClientHello list (`--groups x25519,x25519`, `--key-shares`, `--ciphers`,
`--ciphersuites`, `--sigalgs`, `--alpn`) went out as typed: RFC 8446 4.2.8 forbids two key
shares for one group, and in the other lists it offers nothing more. It is one usage line
naming the repeated item (and the first spelling of it: `x25519,0x001d` is one group), exit
2, before any connection: each case runs against 127.0.0.1:1, where nothing listens, so a
repeat let through ends in "connection refused" (exit 3) and fails the test. The Python API
(`probe(groups=[...])`) goes through the same check.
"""

from __future__ import annotations

import pytest

from tests.cli.test_cli_args import DEAD, assert_usage_error, cli
from tlsprobe.errors import UsageError


@pytest.mark.parametrize("argv, fragments", [
    ((DEAD, "--groups", "x25519,x25519"), ("--groups: 'x25519' is given twice",)),
    ((DEAD, "--groups", "x25519:P-256:0x001d"), ("--groups: '0x001d' repeats 'x25519'",)),
    ((DEAD, "--key-shares", "x25519,x25519"), ("--key-shares: 'x25519' is given twice",)),
    ((DEAD, "--ciphers", "ECDHE-RSA-AES128-GCM-SHA256:TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
     ("--ciphers:", "repeats 'ECDHE-RSA-AES128-GCM-SHA256'", "0xc02f")),
    ((DEAD, "--ciphersuites", "TLS_AES_128_GCM_SHA256,0x13,0x01"),
     ("--ciphersuites: '0x1301' repeats 'TLS_AES_128_GCM_SHA256'",)),
    ((DEAD, "--sigalgs", "rsa_pss_rsae_sha256:ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256"),
     ("--sigalgs: 'rsa_pss_rsae_sha256' is given twice",)),
    ((DEAD, "--alpn", "h2,http/1.1,h2"), ("--alpn: 'h2' is given twice",)),
    ((DEAD, "--quic", "--quic-version", "1,v1"), ("--quic-version: version 1 is given twice",)),
    ((DEAD, "--timing", "--timing-groups", "x25519,x25519"),
     ("--timing-groups: 'x25519' is given twice",)),
    (("timing", DEAD, "--timing-versions", "1.3,1.2,1.3"),
     ("--timing-versions: '1.3' is given twice",)),
    (("timing", DEAD, "--timing-suites", "TLS_AES_128_GCM_SHA256:0x1301"),
     ("--timing-suites: '0x1301' repeats 'TLS_AES_128_GCM_SHA256'",)),
    (("scan", DEAD, "--no-progress", "--extra-groups", "0xfe30,0xfe30"),
     ("--extra-groups: '0xfe30' is given twice",)),
    (("scan", DEAD, "--no-progress", "--policy", "modern", "--policy", "modern"),
     ("--policy 'modern' is given twice",)),
    # openssl s_server refuses the repeat: it was told as "the system openssl cannot serve"
    (("demo", "--groups", "P-256,secp256r1", "--no-msg"),
     ("--groups: 'secp256r1' repeats 'P-256'",)),
])
def test_repeated_item_is_one_usage_line(capsys: pytest.CaptureFixture[str],
                                         argv: tuple[str, ...],
                                         fragments: tuple[str, ...]) -> None:
    err = assert_usage_error(cli(capsys, *argv), *fragments)
    assert "give each once" in err


def test_distinct_items_still_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """The check refuses repeats only: ALPN ids are case-sensitive (h2 and H2 differ), and
    distinct groups in two spellings pass to the connection (refused: exit 3)."""
    code, _, err = cli(capsys, DEAD, "--alpn", "h2,H2", "--groups", "x25519,0x0017")
    assert code == 3 and "connection refused" in err, err


def test_api_probe_refuses_a_repeated_group() -> None:
    from tlsprobe import probe
    with pytest.raises(UsageError, match=r"groups: 29 repeats 'x25519' \(0x001d\)"):
        probe(DEAD, groups=["x25519", 0x1D])


# -- --cafile with --no-verify ----------------------------------------------------------
# The trust store goes unused when the chain is not checked: it was accepted in silence
# (only its existence checked). Every command that has both options (probe, scan, clients)
# and the API's probe/scan refuse the pair with one line naming both, before connecting.
@pytest.mark.parametrize("command", [(), ("scan", "--no-progress"), ("clients",)])
def test_cafile_with_no_verify_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                certs, command: tuple[str, ...]) -> None:
    ca = str(certs.ca)
    argv = (*command[:1], DEAD, *command[1:], "--cafile", ca, "--no-verify")
    assert_usage_error(cli(capsys, *argv), "--cafile and --no-verify contradict each other",
                       "give one of them")


def test_api_refuses_cafile_without_verification(certs) -> None:
    from tlsprobe import probe, scan
    for call in (probe, scan):
        with pytest.raises(UsageError, match=r"cafile and verify=False contradict each other"):
            call(DEAD, cafile=str(certs.ca), verify=False)


@pytest.mark.parametrize("argv", [(DEAD, "--alpn", ","), (DEAD, "--alpn", ":"),
                                  ("scan", DEAD, "--quic", "--alpn", ",")])
def test_an_alpn_list_of_separators_only_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    """`--alpn ,` (a slip for a protocol) went out as no ALPN at all, as `--alpn ''` does, and
    the probe ran (here: connection refused, exit 3); every other list option calls such a
    value an empty list."""
    assert_usage_error(cli(capsys, *argv), "--alpn: empty list", "or '' to offer none")
