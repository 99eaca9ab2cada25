"""Command-line argument checks of the live probe (`tlsprobe HOST[:PORT] ...`) and timing.

Every bad value or combination is refused before connecting, as ONE stderr line
`tlsprobe: error: ...` naming the option, exit 2, never a traceback. Most cases run the real
parser and command in-process against 127.0.0.1:1 (nothing listens there: a check that let a
bad value through would end in "connection refused", exit 3, and fail the test); a few go
through `python -m tlsprobe` and real loopback servers.
"""

from __future__ import annotations

import argparse
import json

import pytest

from tlsprobe.cli import main

DEAD = "127.0.0.1:1"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:   # argparse errors and --help end here
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def assert_usage_error(result: tuple[int, str, str], *fragments: str) -> str:
    code, out, err = result
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("tlsprobe: error: "), err
    assert "Traceback" not in err and "ValueError" not in err and "DecodeError" not in err
    for fragment in fragments:
        assert fragment in err, err
    return err


LONG = "a" * 300


@pytest.mark.parametrize("argv, fragments", [
    # bad values (item 2)
    (("--sigalgs", ""), ("--sigalgs: empty list",)),
    (("--groups", ""), ("--groups: empty list",)),
    (("--groups", " , : "), ("--groups: empty list",)),
    (("--ciphers", ""), ("--ciphers: empty list",)),
    (("--ciphersuites", ""), ("--ciphersuites: empty list",)),
    (("--key-shares", ""), ("--key-shares: empty list", "none")),
    (("--alpn", LONG), ("--alpn:", "at most 255 bytes", "300")),
    (("--alpn", "h2,caf\u00e9"), ("--alpn:", "printable ASCII")),
    (("--sni", "a" * 70000), ("--sni:", "70000 bytes")),
    (("--sni", "a" * 65000), ("the ClientHello cannot be encoded", "--sni")),
    (("--sni", ""), ("--sni: empty name", "--no-sni")),
    (("--sni", "bad host"), ("--sni:", "no spaces")),
    (("--timeout", "nan"), ("argument --timeout:", "got 'nan'")),
    (("--timeout", "inf"), ("argument --timeout:", "got 'inf'")),
    (("--timeout", "0"), ("argument --timeout:",)),
    (("--timeout", "-3"), ("argument --timeout:",)),
    (("--timeout", "1e300"), ("argument --timeout:", "at most 86400")),
    (("--timeout", "abc"), ("argument --timeout: expected a number of seconds",)),
    (("--total-timeout", "inf"), ("argument --total-timeout:",)),
    (("--total-timeout", "0"), ("argument --total-timeout:",)),
    (("--max-message", "0"), ("argument --max-message: must be from 1 to 16777215",)),
    (("--max-chain", "-1"), ("argument --max-chain:",)),
    (("--max-records", "1.5"), ("argument --max-records: expected a whole number",)),
    (("--max-bytes", "0"), ("argument --max-bytes:",)),
    # conflicts (item 4)
    (("--sni", "foo", "--no-sni"), ("--sni and --no-sni",)),
    (("--ciphers", "TLS_AES_128_GCM_SHA256"), ("--ciphers:", "TLS 1.3", "--ciphersuites")),
    (("--ciphersuites", "ECDHE-RSA-AES128-GCM-SHA256"),
     ("--ciphersuites:", "TLS 1.2", "--ciphers")),
    (("--ciphers", "HIGH"), ("--ciphers: 'HIGH' is an OpenSSL cipher-string keyword",)),
    (("--ciphers", "ECDHE-RSA-AES128-GCM-SHA256:!aNULL"), ("'!aNULL'", "keyword")),
    (("--ciphers", "ECDHE+AESGCM"), ("keyword",)),
    (("--ciphers", "NOT-A-SUITE"), ("--ciphers: unknown cipher suite",)),
    # a code point of decimal digits alone: hex or decimal? (tshark and openssl -trace print
    # groups in decimal: x25519 (29), Unknown (4588)); it was read as hex without a word
    (("--groups", "29"), ("--groups: '29' is ambiguous", "decimal x25519 (0x001d)", "hex curveSM2 (0x0029)")),
    (("--groups", "x25519:4588"), ("'4588'", "decimal X25519MLKEM768 (0x11ec)", "hex 0x4588")),
    (("--key-shares", "23"), ("--key-shares: '23'", "decimal secp256r1 (0x0017)")),
    (("--ciphersuites", "4865"), ("--ciphersuites: '4865'", "decimal TLS_AES_128_GCM_SHA256 (0x1301)")),
    (("--sigalgs", "2052"), ("--sigalgs: '2052'", "decimal rsa_pss_rsae_sha256 (0x0804)")),
    # a list for versions the hello does not offer: dropped without a word, it was
    (("--tls1_3", "--ciphers", "AES128-SHA"), ("--ciphers", "TLS 1.2 and older", "TLS 1.3")),
    (("--tls1_3", "--ciphers", "0xc02f"), ("--ciphers", "TLS 1.2 and older")),
    (("--tls1_2", "--ciphersuites", "TLS_AES_256_GCM_SHA384"), ("--ciphersuites", "TLS 1.2")),
    (("--tls1_2", "--key-shares", "x25519"), ("--key-shares", "TLS 1.3", "TLS 1.2")),
    (("--tls1_2", "--tls1_1", "--groups", "x448", "--key-shares", "x448"),
     ("--key-shares", "TLS 1.2, TLS 1.1")),
    (("--tls1", "--sigalgs", "rsa_pss_rsae_sha256"), ("--sigalgs", "TLS 1.0")),
    (("--tls1_2", "--groups", "X25519MLKEM768"), ("--groups", "X25519MLKEM768 (0x11ec)",
                                                  "TLS 1.3")),
    # argparse's own errors (item 5)
    (("--bogus",), ("unrecognized arguments: --bogus", "(see tlsprobe --help)")),
    (("--groups",), ("argument --groups: expected one argument", "(see tlsprobe --help)")),
    # timing combinations (item 6)
    (("--timing", "--msg"), ("--msg cannot be used with --timing",)),
    (("--timing", "--http-get", "/"), ("--http-get cannot be used with --timing",)),
    (("--timing", "--first-flight-only"), ("--first-flight-only cannot be used with --timing",)),
    (("--timing", "--pcap-out", "x.pcap"), ("--pcap-out cannot be used with --timing",)),
    (("--timing", "--ciphers", "ECDHE-RSA-AES128-GCM-SHA256"), ("--timing-suites",)),
    (("--timing", "--tls1_1"), ("--tls1_1 cannot be used with --timing",)),
    (("--timing", "--tls1_2", "--timing-versions", "1.3"), ("--timing-versions",)),
    (("--timing", "--groups", "x25519", "--timing-groups", "P-256"), ("--timing-groups",)),
    (("--timing-runs", "5"), ("--timing-runs only applies", "add --timing")),
    (("--timing-groups", "x25519"), ("--timing-groups only applies",)),
    (("--timing", "--timing-runs", "0"), ("argument --timing-runs: must be from 1 to 10000",)),
    (("--timing", "--timing-timeout", "nan"), ("argument --timing-timeout:",)),
    (("--timing", "--timing-groups", "0x9999"),
     ("none of the groups given can be timed", "0x9999: no key share can be computed here")),
    (("--timing", "--groups", "sect163k1"), ("sect163k1 (0x0001): no key share",)),
    (("--timing", "--tls1_2", "--groups", "X25519MLKEM768"), ("not a TLS 1.2 group",)),
])
def test_probe_usage_errors_are_one_line(capsys, argv, fragments):
    assert_usage_error(cli(capsys, DEAD, *argv), *fragments)


@pytest.mark.parametrize("target, fragments", [
    ("127.0.0.1:", ("empty port",)),
    ("[::1]:", ("empty port",)),
    ("::1:14434", ("IPv6 addresses need brackets: [::1]:14434",)),
    ("2001:db8::1:99999", ("IPv6 addresses need brackets: [2001:db8::1]:99999",)),
    ("127.0.0.1:99999", ("bad port '99999'", "1-65535")),
    ("127.0.0.1:0", ("bad port '0'",)),
    ("127.0.0.1:https", ("bad port 'https'",)),
    ("[localhost]:443", ("not an IPv6 address",)),
    ("a:b:c", ("expected HOST[:PORT]",)),
])
def test_bad_targets_are_usage_errors(capsys, target, fragments):
    assert_usage_error(cli(capsys, target), *fragments)


@pytest.mark.parametrize("argv, fragments", [
    (("scan", "--fail-on", "bogus", DEAD), ("argument --fail-on: invalid choice",
                                            "(see tlsprobe scan --help)")),
    (("timing", DEAD, "--timeout", "inf"), ("argument --timeout:", "(see tlsprobe timing --help)")),
    (("timing", DEAD, "--timing-groups", "0x9999"), ("none of the groups given can be timed",)),
    (("pcap", "--bogus"), ("(see tlsprobe pcap --help)",)),
])
def test_subcommand_parser_errors_are_one_line(capsys, argv, fragments):
    assert_usage_error(cli(capsys, *argv), *fragments)


def test_no_arguments_prints_usage_and_exits_2(run_cli):
    res = run_cli()
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0].startswith("usage: tlsprobe HOST[:PORT]")
    assert lines[-1] == "tlsprobe: error: no target given (see tlsprobe --help)"
    res = run_cli("--timeout", "inf", "127.0.0.1:1")   # the real entry point, one line
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1
    assert "Traceback" not in res.stderr


def test_help_documents_the_choices(capsys):
    code, out, _ = cli(capsys, "--help")
    text = " ".join(out.split())
    assert code == 0
    assert "not OpenSSL cipher-string keywords" in text
    assert "placeholder share" in text
    assert "on stderr with --json" in text
    assert "subcommands:" in text


def test_hex_ids_go_into_either_list(capsys):
    """The escape hatch: a hex id is sent as given (to test a server), so the name check
    does not reject it; nothing listens, so the probe gets as far as connecting."""
    code, _, err = cli(capsys, DEAD, "--ciphers", "0x1301:0xc02f", "--timeout", "1")
    assert code == 3 and "connection refused" in err


# -- against real servers ----------------------------------------------------------------------
def _target(server) -> str:
    return f"127.0.0.1:{server.port}"


def test_json_with_msg_keeps_stdout_pure_json(run_cli, server_cache):
    srv = server_cache("openssl", groups=["X25519"], proto="both")
    res = run_cli(_target(srv), "--json", "--msg", "--no-verify", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)   # the whole of stdout
    assert data["handshake_complete"] is True
    assert ">>> TLS" in res.stderr and "ClientHello" in res.stderr
    assert ">>> TLS" not in res.stdout   # no trace line (the JSON lists ">>> ClientHello")


def test_placeholder_key_share_is_noted_once(run_cli, server_cache):
    """A key share tlsprobe cannot compute is still sent (the server answers with a
    HelloRetryRequest for x25519 here) and a single note says so."""
    srv = server_cache("openssl", groups=["X25519"], proto="tls1_3")
    res = run_cli(_target(srv), "--tls1_3", "--groups", "sect163k1:x25519", "--key-shares",
                  "sect163k1", "--json", "--no-verify", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    notes = [ln for ln in res.stderr.splitlines() if ln.startswith("tlsprobe: note:")]
    assert len(notes) == 1 and "sect163k1 (0x0001)" in notes[0]
    assert "placeholder key share" in notes[0]
    data = json.loads(res.stdout)
    assert data["key_exchange"]["group"]["name"] == "x25519"


def test_timing_follows_version_flags_and_groups(run_cli, server_cache):
    """`--timing --tls1_2 --groups x25519` times exactly TLS 1.2 with x25519."""
    srv = server_cache("openssl", groups=["X25519", "P-256"], proto="both")
    res = run_cli(_target(srv), "--timing", "--tls1_2", "--groups", "x25519",
                  "--timing-runs", "2", "--timing-warmup", "0", "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["discovery"] == "explicit"
    assert [(e["version"]["name"], e["group"]["id"]) for e in data["entries"]] == \
        [("TLS 1.2", 0x001D)]


def test_in_process_run_keeps_the_tests_own_alarm(run_cli) -> None:  # type: ignore[no-untyped-def]
    """run_cli's in-process deadline (SIGALRM) does not cancel the alarm pytest-timeout set
    for the whole test: it is running again after the run, for what was left of it."""
    import signal
    before, _ = signal.getitimer(signal.ITIMER_REAL)
    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("tlsprobe")
    after, _ = signal.getitimer(signal.ITIMER_REAL)
    if before:   # pytest-timeout's signal method (timeout = 300 in pyproject)
        assert 0 < after <= before
    else:
        assert after == 0


def test_iana_two_byte_suite_spelling_is_one_suite(run_cli, server_cache):
    """IANA writes a suite as its two bytes, "0x13,0x02": one suite (TLS_AES_256_GCM_SHA384),
    in --ciphersuites, --ciphers and --timing-suites alike, though ',' separates items; it
    was split into the suites 0x0013 and 0x0002 (the server refused the hello)."""
    srv = server_cache("openssl", groups=["X25519"], proto="both")
    res = run_cli(_target(srv), "--tls1_3", "--ciphersuites", "0x13,0x02", "--json",
                  "--no-verify", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [c["id"] for c in data["offer"]["cipher_suites"]] == [0x1302]
    assert data["cipher"]["id"] == 0x1302
    res = run_cli(_target(srv), "--tls1_2", "--ciphers", "0xC0,0x30:0xc0,0x2f", "--json",
                  "--no-verify", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    suites = [c["id"] for c in json.loads(res.stdout)["offer"]["cipher_suites"]]
    assert suites[:2] == [0xC030, 0xC02F], suites
    res = run_cli(_target(srv), "--timing", "--timing-runs", "1", "--timing-warmup", "0",
                  "--timing-groups", "x25519", "--timing-versions", "1.3", "--timing-suites",
                  "0x13,0x02", "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    entries = json.loads(res.stdout)["entries"]
    assert [e["offered_suite"]["id"] for e in entries] == [0x1302], entries


#: a value argparse accepts for the options whose type refuses "1"
VALUES = {"--fail-under": "B"}


def _option_words(action: argparse.Action) -> list[str]:
    """The option of `action` with one value argparse accepts (the command checks it later)."""
    option = action.option_strings[-1]
    if action.nargs == 0:
        return [option]
    if action.choices:
        return [option, str(next(iter(action.choices)))]
    return [f"{option}={VALUES.get(option, '1')}"]


@pytest.mark.parametrize("command", ["probe", "scan", "pcap", "speed", "demo", "timing",
                                     "survey", "clients"])
def test_every_option_is_told_given_whatever_its_value(command: str) -> None:
    """cli.py's `given_options` (what a form of a command refuses: `survey summary DIR
    --workers N` on N cores) names each option given, whatever its kind: a second parse
    of an "append" option (`pcap -i lo`) failed with an internal error (exit 70)."""
    from tlsprobe.cli import build_parser
    parser = build_parser(command)
    positional = {"probe": ["h"], "timing": ["h"], "survey": ["t"]}.get(command, [])
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "version"):
            continue
        words = _option_words(action)
        assert parser.given_options([*words, *positional]) == {action.dest}, words
        if action.nargs != 0:   # at its default value too (it was told apart by value)
            again = [f"{action.option_strings[-1]}={action.default}"] \
                if action.default not in (None, "") else words
            assert parser.given_options([*again, *positional]) == {action.dest}, again
