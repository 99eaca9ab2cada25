"""`scan --quic`: the group audit over QUIC against ngtcp2's server (GnuTLS, which answers
offers without key shares with a HelloRetryRequest, so the server's order is established)
and aioquic's (which never sends one: the set is established, not the order), each with a
chosen non-default group list."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tlsprobe.errors import EXIT_ALERT, EXIT_USAGE

NOT_APPLICABLE = "not applicable over QUIC: QUIC carries TLS 1.3 only (RFC 9001 4.2)"


def test_groups_in_the_servers_order_over_quic_ngtcp2(
        ngtcp2_server: Any, run_cli: Callable[..., Any]) -> None:
    server = ngtcp2_server("-GROUP-ALL:+GROUP-SECP384R1:+GROUP-X25519:+GROUP-SECP256R1:"
                           "%SERVER_PRECEDENCE")
    res = run_cli("scan", server.target, "--quic", "--checks", "groups", "--json",
                  "--no-progress", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["transport"] == "quic" and report["error"] is None
    g13, g12 = report["groups"]
    assert g13["version"]["name"] == "TLS 1.3"
    assert [g["name"] for g in g13["supported"]] == ["secp384r1", "x25519", "secp256r1"]
    assert (g13["order"], g13["method"]) == ("server", "hello_retry_request")
    assert g13["inconclusive"] == []
    # GnuTLS 3.7 has no ML-KEM: X25519MLKEM768 cannot be configured, and is not supported
    assert "X25519MLKEM768" in [g["name"] for g in g13["not_supported"]]
    # no TLS 1.2 hello is sent over QUIC: not applicable, no connection
    assert (g12["version"]["name"], g12["method"], g12["notes"]) == (
        "TLS 1.2", "not_run", [NOT_APPLICABLE])
    assert g12["connections"] == 0
    assert report["connections"] == {"groups TLS 1.3": g13["connections"]}
    assert report["total_connections"] == g13["connections"] > 0
    assert not any(f["version"] == "TLS 1.2" or "TLS 1.2" in f["message"]
                   for f in report["findings"])


def test_groups_over_quic_aioquic_text(quic_server: Any, run_cli: Callable[..., Any]) -> None:
    server = quic_server("secp384r1,x25519")
    res = run_cli("scan", server.target, "--quic", "--checks", "groups", "--no-progress",
                  "--timeout", "5")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Transport: QUIC (TLS 1.3 in QUIC Initial and Handshake packets, UDP)" in out
    section = out[out.index("Groups, TLS 1.3"):out.index("Groups, TLS 1.2")]
    listed = re.findall(r"^\d+\s+(\S+) \(0x[0-9a-f]{4}\)", section, re.M)
    assert sorted(listed) == ["secp384r1", "x25519"]
    # aioquic sends no HelloRetryRequest and takes the first key share it supports: the
    # report must not claim the server's order, and says why
    assert "Order: order not established" in section
    assert "note: order not established: with real key shares the server may take" in section
    assert "Order: server" not in out
    # inconclusive: only the groups whose key shares tlsprobe cannot compute
    unsure = re.search(r"^Not established: (.*)$", section, re.M)
    assert unsure is None or set(unsure.group(1).split(", ")) <= {
        "curveSM2MLKEM768", "X25519Kyber768Draft00"}
    tail = out[out.index("Groups, TLS 1.2"):]
    assert tail.splitlines()[1] == NOT_APPLICABLE
    assert re.search(r"^Connections: \d+ in [\d.]+ s \(groups TLS 1\.3 \d+\)$", out, re.M)


def test_quic_usage_errors(run_cli: Callable[..., Any]) -> None:
    for args, text in ((["scan", "127.0.0.1:9", "--quic", "--starttls", "smtp"],
                        "--starttls cannot be used with --quic"),
                       (["scan", "127.0.0.1:9", "--quic-version", "2", "--compare-tcp"],
                        "--quic-version needs --quic"),
                       (["scan", "127.0.0.1:9", "--quic", "--tcp-port", "443"],
                        "--tcp-port needs --compare-tcp"),
                       (["127.0.0.1:9", "--quic", "--quic-version", "3"],
                        "'3' is not 1 or 2"),
                       (["scan", "127.0.0.1:9", "--quic", "--checks", "groups,heartbleed"],
                        "--checks heartbleed: the active checks run over TCP"),
                       # an alias of active checks only: nothing of it runs over QUIC
                       (["scan", "127.0.0.1:9", "--quic", "--checks", "tolerance"],
                        "--checks tolerance: the active checks run over TCP")):
        res = run_cli(*args)
        assert res.returncode == EXIT_USAGE, (args, res.stderr)
        [line] = res.stderr.strip().splitlines()
        assert text in line


def test_silent_udp_peer_is_a_network_error(run_cli: Callable[..., Any]) -> None:
    import socket
    from tlsprobe.errors import EXIT_NETWORK
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:   # bound, never answers
        silent.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{silent.getsockname()[1]}"
        res = run_cli("scan", target, "--quic", "--checks", "groups", "--no-progress",
                      "--timeout", "0.5", "--retries", "0", timeout=60)
    assert res.returncode == EXIT_NETWORK, res.stderr
    [line] = res.stderr.strip().splitlines()
    # the TLS 1.2 hellos never sent are not what the error is about
    assert line.startswith(f"tlsprobe: {target}: timed out"), line
    assert "no connection of the audit was answered" in line


def test_scan_timeout_names_what_was_ignored(udp_peer: Any,
                                             run_cli: Callable[..., Any]) -> None:
    # a peer answering each datagram with one tlsprobe cannot read: the probe's timeout line
    # names it ("ignored N datagrams or packets (last: ...)"); the audit's said only "timed
    # out waiting for the server (after 1 attempt, no retries)"
    from tlsprobe.errors import EXIT_NETWORK
    sock, _, answers = udp_peer
    answers.append(b"\x40" + b"garbage" * 5)   # a short header for another connection
    target = f"127.0.0.1:{sock.getsockname()[1]}"
    res = run_cli("scan", target, "--quic", "--checks", "versions", "--json", "--no-progress",
                  "--timeout", "1", "--retries", "0", timeout=60)
    assert res.returncode == EXIT_NETWORK, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert re.search(r"timed out waiting for the server \(no QUIC answer for 1\.0 s\) after "
                     r"\d Initial transmissions; ignored \d+ datagrams or packets \(last: "
                     r"1-RTT packet for another connection ID\)", line), line
    assert "(last: 1-RTT packet for another connection ID)" in json.loads(res.stdout)["error"]


def test_nothing_listening_is_not_retried(run_cli: Callable[..., Any]) -> None:
    import socket
    from tlsprobe.errors import EXIT_NETWORK
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as gone:
        gone.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{gone.getsockname()[1]}"
    res = run_cli("scan", target, "--quic", "--checks", "groups", "--json", "--no-progress",
                  "--timeout", "2", timeout=60)
    assert res.returncode == EXIT_NETWORK, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line == f"tlsprobe: {target}: connection refused (ICMP port unreachable: nothing " \
        "listens on that UDP port) (no connection of the audit was answered)"
    report = json.loads(res.stdout)
    assert report["retries"] == 0 and report["transport"] == "quic"


def test_compare_tcp_side_by_side(ngtcp2_server: Any, server_cache: Any,
                                  run_cli: Callable[..., Any]) -> None:
    # the same server order over QUIC (ngtcp2: P-384, X25519, P-256) and over TCP (OpenSSL
    # with P-384 and X25519 only): the groups row differs, the post-quantum rows agree
    quic = ngtcp2_server("-GROUP-ALL:+GROUP-SECP384R1:+GROUP-X25519:+GROUP-SECP256R1:"
                         "%SERVER_PRECEDENCE")
    tcp = server_cache("openssl", groups="P-384:X25519", serverpref=True, proto="tls1_3")
    res = run_cli("scan", quic.target, "--quic", "--compare-tcp", "--tcp-port", str(tcp.port),
                  "--checks",
                  "groups,pq", "--json", "--no-progress", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    quic_report, tcp_report, comparison = (json.loads(x) for x in res.stdout.splitlines())
    assert quic_report["transport"] == "quic" and "transport" not in tcp_report
    assert (comparison["kind"], comparison["tcp_port"], comparison["quic_port"]) == (
        "comparison", tcp.port, quic.port)
    rows = {r["what"]: r for r in comparison["rows"]}
    groups = rows["groups, TLS 1.3"]
    assert (groups["tcp"], groups["quic"], groups["same"]) == (
        "secp384r1, x25519 (order: server)",
        "secp384r1, x25519, secp256r1 (order: server)", False)
    pq = [r for w, r in rows.items() if w.startswith("post-quantum ")]
    assert len(pq) == 4 and all(r["same"] for r in pq)
    assert comparison["same"] is False


def test_compare_tcp_with_one_audit_failed_compares_nothing(
        server_cache: Any, run_cli: Callable[..., Any]) -> None:
    # nothing listens on the QUIC port: the QUIC audit fails (exit 3), so its side has no
    # answer, and a row is not compared, not "DIFFERENT" (JSON "same": null), which said
    # the server answered otherwise over QUIC
    import socket
    tcp = server_cache("openssl", groups="P-384:X25519", proto="tls1_3")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as gone:
        gone.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{gone.getsockname()[1]}"
    args = ("scan", target, "--quic", "--compare-tcp", "--tcp-port", str(tcp.port),
            "--checks", "groups", "--no-progress", "--timeout", "2")
    res = run_cli(*args, "--json")
    assert res.returncode == 3, res.stderr
    comparison = json.loads(res.stdout.splitlines()[-1])
    groups = {r["what"]: r for r in comparison["rows"]}["groups, TLS 1.3"]
    assert (groups["tcp"], groups["quic"], groups["same"]) == (
        "secp384r1, x25519 (order: server)", "-", None), groups
    assert comparison["same"] is None
    assert all(r["same"] is None for r in comparison["rows"]), comparison["rows"]
    text = run_cli(*args)
    assert text.returncode == 3, text.stderr
    assert "DIFFERENT" not in text.stdout
    assert "  groups, TLS 1.3: not compared" in text.stdout.splitlines()


def test_compare_text_lists_differences_then_the_verdict() -> None:
    from tlsprobe.commands.scan_quic import compare_text
    from tlsprobe.model.audit import AuditReport, GroupAudit, PqVerdict
    from tlsprobe.model.probe import Codepoint

    def report(port: int, groups: list[int], verdict: str, n: int) -> AuditReport:
        audit = GroupAudit(Codepoint.version(0x0304), True, "hello_retry_request",
                           tuple(Codepoint.group(g) for g in groups), order="server")
        return AuditReport("example.test", port, groups=(audit,), total_connections=n,
                           post_quantum=(PqVerdict("capability", "X25519MLKEM768", verdict),))
    assert compare_text(report(443, [0x18, 0x1D], "no", 9),
                        report(8443, [0x18, 0x1D], "no", 7)) == [
        "", "TCP (443) vs QUIC (8443) for example.test, TLS 1.3",
        "  groups, TLS 1.3: same: secp384r1, x25519 (order: server)",
        "  post-quantum capability (X25519MLKEM768): same: no",
        "  the same answers (connections: TCP 9, QUIC 7)"]
    assert compare_text(report(443, [0x1D], "yes", 9), report(443, [0x1D], "no", 7))[3:] == [
        "  post-quantum capability (X25519MLKEM768): DIFFERENT", "    TCP:  yes",
        "    QUIC: no", "  1 difference(s) (connections: TCP 9, QUIC 7)"]


def test_suites_and_post_quantum_over_quic_aioquic(quic_server: Any,
                                                   run_cli: Callable[..., Any]) -> None:
    # aioquic's TLS 1.3 suites in its own order (tls.Context: AES-256, AES-128, ChaCha20;
    # `negotiate` takes the first of its list that the client offers); its library has no
    # X25519MLKEM768 (aioquic 1.7 tls.Group), so the post-quantum verdicts are "no"
    server = quic_server("x25519,secp256r1")
    res = run_cli("scan", server.target, "--quic", "--checks", "suites,pq", "--json",
                  "--no-progress", "--timeout", "5", "--cafile", server.ca)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    [suites] = report["suites"]
    assert suites["version"]["name"] == "TLS 1.3"
    assert [s["iana_name"] for s in suites["supported"]] == [
        "TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256"]
    assert (suites["order"], suites["complete"]) == ("server", True)
    pq = {v["check"]: v["verdict"] for v in report["post_quantum"]}
    assert (pq["capability"], pq["browser_like"], pq["tolerance"]) == ("no", "no", "yes")
    assert report["connections"]["suites TLS 1.3"] == suites["connections"] > 0
    assert report["total_connections"] == sum(report["connections"].values())


def test_default_scan_over_quic_judges_the_versions_quic_cannot_carry(
        ngtcp2_server: Any, run_cli: Callable[..., Any]) -> None:
    """The default scan over QUIC: TLS 1.2 and older cannot be spoken over QUIC (RFC 9001
    4.2), so the versions table says so (not spoken, with the reason), the checks read from
    the audit are judged (no "TLS 1.2 support not tested" inconclusive, no "inconclusive:
    not applicable"), and the rating is not provisional on versions QUIC cannot carry."""
    server = ngtcp2_server("-GROUP-ALL:+GROUP-SECP384R1:+GROUP-X25519")
    res = run_cli("scan", server.target, "--quic", "--json", "--no-progress", "--no-verify",
                  "--timeout", "5", timeout=240)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["error"] is None and report["transport"] == "quic"
    status = {v["version"]["name"]: (v["status"], v["detail"]) for v in report["versions"]}
    assert status.pop("TLS 1.3")[0] == "supported"
    assert status == {name: ("not_supported", NOT_APPLICABLE)
                      for name in ("TLS 1.2", "TLS 1.1", "TLS 1.0", "SSL 3.0")}, status
    checks = {c["name"]: (c["verdict"], c["reason"]) for c in report["check_results"]}
    assert not [c for c in checks.values() if c[0] == "inconclusive"], checks
    for name in ("poodle", "freak", "logjam", "rc4", "sweet32", "beast", "null", "anon",
                 "lucky13"):
        assert checks[name][0] == "not vulnerable", (name, checks[name])
        assert "not tested" not in checks[name][1] and "refused" not in checks[name][1]
    assert checks["null"][1].startswith("no NULL encryption suites: the complete suite list "
                                        "of TLS 1.3 has none; TLS 1.2"), checks["null"]
    assert "not carried over QUIC" in checks["freak"][1], checks["freak"]
    assert checks["dh"][0] == "not applicable", checks["dh"]
    # what was never asked over QUIC is not said of the server ("TLS 1.2 is not spoken")
    assert "not spoken" not in checks["dh"][1] and "not carried over QUIC" in checks["dh"][1]
    unknowns = [u["reason"] for u in report["rating"]["unknowns"]]
    assert not [u for u in unknowns if "SSL 3.0" in u or "TLS 1." in u or "sslv2" in u
                or "heartbleed" in u or "robot" in u], unknowns
    # the text report: the versions table and the rating say the same
    text = run_cli("scan", server.target, "--quic", "--no-progress", "--no-verify",
                   "--timeout", "5", "--checks", "versions,poodle,freak,dh", timeout=240)
    assert text.returncode == 0, text.stderr
    assert re.search(r"^TLS 1\.2 +no +not applicable over QUIC", text.stdout, re.M), text.stdout
    assert "support inconclusive" not in text.stdout and "not tested" not in text.stdout


def test_an_alias_over_quic_runs_what_quic_carries(ngtcp2_server: Any,
                                                  run_cli: Callable[..., Any]) -> None:
    """`--checks vulns` over QUIC: the vulnerability checks read from the audit run, the
    active ones (TLS over TCP) are left out as from the default, where the alias was a
    usage error naming its first active check ("--checks fallback")."""
    from tlsprobe.model.check_catalog import ACTIVE, ALIASES
    server = ngtcp2_server("-GROUP-ALL:+GROUP-X25519")
    res = run_cli("scan", server.target, "--quic", "--checks", "vulns", "--json",
                  "--no-progress", "--no-verify", "--timeout", "5", timeout=240)
    assert res.returncode == 0, res.stderr
    names = {c["name"] for c in json.loads(res.stdout)["check_results"]}
    assert names == {n for n in ALIASES["vulns"] if n not in ACTIVE}, names


def test_a_quic_transport_close_is_no_refusal_of_tls13(udp_peer: Any,
                                                      run_cli: Callable[..., Any]) -> None:
    # a server that closes every connection with CONNECTION_REFUSED (RFC 9000 20.1: it takes
    # no new connection) said nothing about TLS 1.3, which RFC 9001 4.8 would refuse with a
    # CRYPTO_ERROR (an alert): the audit reported TLS 1.3 "not_supported" ("connection
    # closed without an answer"); it is inconclusive with the server's code and its reason
    # (escaped), the exit code the probe gives for that close (5)
    from tlsprobe.errors import EXIT_ALERT
    from tlsprobe.net import quic_wire as w
    sock, _, answers = udp_peer

    def refused(datagram: bytes) -> bytes:
        dcid = datagram[6:6 + datagram[5]]
        at = 6 + len(dcid)
        scid = datagram[at + 1:at + 1 + datagram[at]]
        frames = b"\x1c\x02\x06\x07busy\x1b[K" + bytes(8)
        header = w.long_header(0, scid, b"\x05" * 8, 0, len(frames), b"")
        return w.seal(w.PacketKeys.initial(dcid, "server"), header, 0, 2, frames)
    answers.append(refused)
    target = f"127.0.0.1:{sock.getsockname()[1]}"
    res = run_cli("scan", target, "--quic", "--json", "--no-progress", "--timeout", "2",
                  timeout=60)
    assert res.returncode == EXIT_ALERT, res.stderr
    closed = "server closed the QUIC connection with CONNECTION_REFUSED (0x2): 'busy\\x1b[K'"
    assert res.stderr.strip().splitlines() == [f"tlsprobe: {target}: {closed}"]
    assert "\x1b" not in res.stdout
    tls13 = json.loads(res.stdout)["versions"][0]
    assert (tls13["version"]["name"], tls13["status"], tls13["detail"]) == \
        ("TLS 1.3", "inconclusive", closed)


def test_refused_hellos_over_quic_do_not_make_tls13_unspoken(
        quic_server: Any, run_cli: Callable[..., Any]) -> None:
    # aioquic with P-384 alone never sends a HelloRetryRequest: the versions check's hellos
    # (x25519 shares) are refused with handshake_failure. QUIC carries TLS 1.3 only (every
    # QUIC server speaks it), so that refusal is about the hellos; the audit said "the
    # server accepted no protocol version (TLS 1.3)", TLS 1.3 "not_supported"
    server = quic_server("secp384r1")
    res = run_cli("scan", server.target, "--quic", "--checks", "versions", "--json",
                  "--no-progress", "--timeout", "5", timeout=120)
    report = json.loads(res.stdout)
    tls13 = report["versions"][0]
    assert (tls13["version"]["name"], tls13["status"]) == ("TLS 1.3", "inconclusive"), tls13
    assert tls13["detail"].endswith("the channel carries TLS 1.3 only, so the refusals are "
                                    "about these hellos (groups, suites, ALPN), not the "
                                    "version"), tls13
    assert "accepted no protocol version" not in res.stderr


def test_alpn_of_every_hello_over_quic(quic_server: Any, run_cli: Callable[..., Any]) -> None:
    """`--alpn` names the protocols every hello of `scan --quic` offers: a DNS-over-QUIC
    server (ALPN doq only) refuses the default h3 (no_application_protocol: no group is
    "not supported" for it, the scan says so and names --alpn) and answers --alpn doq;
    --alpn without --quic, or empty, is a usage error."""
    server = quic_server("secp384r1,x25519", alpn="doq")
    base = ("scan", server.target, "--quic", "--checks", "groups", "--json", "--no-progress",
            "--timeout", "5")
    res = run_cli(*base, "--alpn", "doq")
    assert res.returncode == 0, res.stderr
    g13 = json.loads(res.stdout)["groups"][0]
    assert sorted(g["name"] for g in g13["supported"]) == ["secp384r1", "x25519"]
    res = run_cli(*base)    # h3 refused: no group refused, the scan says why and what to do
    report = json.loads(res.stdout)
    assert res.returncode == EXIT_ALERT, res.stderr
    assert not any(g["not_supported"] for g in report["groups"]), report["groups"]
    assert "no_application_protocol (120)" in report["error"] and "--alpn" in report["error"]
    for args, message in ((("scan", server.target, "--alpn", "doq"), "--alpn needs --quic"),
                          ((*base, "--alpn", ""), "--alpn: empty list")):
        res = run_cli(*args)
        assert res.returncode == EXIT_USAGE and message in res.stderr, res.stderr
