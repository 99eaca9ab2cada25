"""Golden text outputs (issue 31 item 8): the probe summary, the --msg trace, the scan
report, the pcap table and details, the timing table, exactly as printed, on a pipe (plain
text, the renderers' own width) and on a 100-column terminal (`terminal` fixture: rich's
terminal path without colour). The inputs are fixed: model values built here and the
recorded captures of captures/, so every line is the code's, none the run's. Regenerate
with the command in tests/golden/README.md."""
from __future__ import annotations

import dataclasses
import io
import re
import shutil
from pathlib import Path

import pytest

from tlsprobe.model.audit import (AuditReport, ConsistencyCheck, DheAudit, DhParameters,
                                  GroupAudit, PqVerdict, SigalgAudit, SuiteAudit, SuiteRow,
                                  TrustCheck, VersionSupport)
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.model.vocab import KxStrength
from tlsprobe.model.starttls import StartTlsInfo
from tlsprobe.model.probe import (AlertInfo, CertificateInfo, Cipher, Codepoint, KeyExchange,
                                  Offer, ProbeResult, Timings, Verification)
from tlsprobe.model.timing import (MEASURED, NOT_RUN, REFUSED, EntryTiming, Stats,
                                   TimingReport, rank)
from tlsprobe.policy.findings import with_findings
from tlsprobe.policy.load import load_policy
from tlsprobe.report.audit_tables import render_audit, render_summary
from tlsprobe.report.offline_details import render_details
from tlsprobe.report.offline_tables import connection_row, render_connections
from tlsprobe.report.tables import render_probe
from tlsprobe.report.timing_tables import render_timing

REPO = Path(__file__).resolve().parents[2]
#: the folder beside the command (its name is in the file column of the goldens)
CORPUS_DIR = "shared"
CAPTURES = REPO / "captures"
V, G, S = Codepoint.version, Codepoint.group, Codepoint.sigscheme


def _cert(i: int, san: tuple[str, ...] = (), key: str = "RSA", bits: int | None = 2048,
          signature: str = "sha256WithRSAEncryption", not_after: str = "2099-01-01T00:00:00+00:00"
          ) -> CertificateInfo:
    """A certificate; dates in the past or far ahead, so that no finding depends on today."""
    return CertificateInfo(f"CN=host{i}.example, O=Example {i}", f"CN=ca{i + 1}.example",
                           key, bits, signature, "2019-01-01T00:00:00+00:00", not_after,
                           f"{i:040x}", f"{i:064x}", san)


def _offer(*versions: int) -> Offer:
    return Offer(tuple(V(v) for v in versions), (Cipher.of(0x1301), Cipher.of(0xC02F)),
                 (G(0x11EC), G(0x1D), G(0x17)), (G(0x11EC),), (S(0x0804), S(0x0403)),
                 ("h2", "http/1.1"), "example.com", 1496)


def probe_tls13() -> ProbeResult:
    """A TLS 1.3 handshake with every row the summary has: HelloRetryRequest, a hybrid
    group, a chain longer than the summary shows, a SAN list longer than it shows."""
    sans = tuple(f"www{i}.example.com" for i in range(11))
    chain = (_cert(0, sans),) + tuple(_cert(i, key="EC", bits=256) for i in range(1, 12))
    return ProbeResult(
        host="example.com", port=443, address="127.0.0.1", offer=_offer(0x0304, 0x0303),
        version=V(0x0304), cipher=Cipher.of(0x1301),
        key_exchange=KeyExchange("hybrid", "hello_retry_request", G(0x11EC), 1120, 1216,
                                 server_temp_key="X25519MLKEM768, 1120 bytes", valid=True),
        hello_retry_request=G(0x11EC), signature_scheme=S(0x0804), alpn="h2",
        session_ticket_lifetime=7200, certificates=chain,
        verification=Verification(True, "0 (ok)", True, 0), handshake_complete=True,
        finished_verified=True, http_status="HTTP/1.1 200 OK", signature_verified=True,
        signature_detail="rsa_pss_rsae_sha256 (0x0804) CertificateVerify",
        ocsp_stapling="stapled", ocsp_response_bytes=1500,
        alerts=(AlertInfo("received", 1, 0, "close_notify"),),
        timings=Timings(1.25, 12.5, 13.75))


def probe_tls12_weak() -> ProbeResult:
    """TLS 1.2 with a small DH prime, a failed signature, a requested client certificate,
    a fatal alert and an error, on an IPv6 target; text from the peer with a control
    character (shown escaped)."""
    return ProbeResult(
        host="::1", port=8443, address="::1", offer=_offer(0x0303),
        version=V(0x0303), cipher=Cipher.of(0x009E),
        key_exchange=KeyExchange("DHE", "dhe_parameters", None, 128, None,
                                 dh_prime_bits=1024, dh_group_name="modp_1024",
                                 server_temp_key="DH, 1024 bits",
                                 problem="the server's public value is 1"),
        signature_scheme=S(0x0401), alpn=None,
        certificates=(_cert(7, key="RSA", bits=1024),),
        verification=Verification(False, "19 (self-signed certificate in certificate chain)",
                                  None, 19),
        signature_verified=False, signature_detail="rsa_pkcs1_sha256 over the DH parameters",
        client_certificate_requested=True, extended_master_secret=False,
        secure_renegotiation=True, ocsp_stapling="none",
        alerts=(AlertInfo("received", 2, 40, "handshake_failure"),
                AlertInfo("sent", 1, 0, "close_notify")),
        timings=Timings(0.5, None, None), error="server said \x1b[31mno\x1b[0m",
        error_kind="alert")




def probe_states() -> list[ProbeResult]:
    """The rows that depend on how far the handshake went and on what it was: STARTTLS, an
    anonymous suite, a first-flight stop, a refusal after our Finished, no ServerHello, an
    OCSP status announced without a response, TLS 1.3 without HelloRetryRequest, a TLS 1.0
    key exchange, the RSA key transport, handshakes that ended before the ServerKeyExchange
    and CertificateStatus (TLS 1.2) or EncryptedExtensions (TLS 1.3)."""
    base = ProbeResult(host="mail.example", port=25, address="127.0.0.2",
                       offer=_offer(0x0304, 0x0303), version=V(0x0303),
                       cipher=Cipher.of(0xC018), handshake_complete=False)
    return [
        dataclasses.replace(
            base, starttls=StartTlsInfo("smtp", "port", "220 mail.example ESMTP", "STARTTLS"),
            anonymous=True, incomplete_reason="--first-flight-only",
            key_exchange=KeyExchange("ECDHE", "server_key_exchange", G(0x17), 65, None),
            ocsp_stapling="announced, no CertificateStatus"),
        dataclasses.replace(base, version=V(0x0301), cipher=Cipher.of(0x0033),
                            key_exchange=KeyExchange("DHE", "dhe_parameters", G(0x0100), 256,
                                                     256, dh_prime_bits=2048,
                                                     dh_group_name="ffdhe2048"),
                            error="alert decrypt_error after our Finished", finished_verified=False,
                            extended_master_secret=True, secure_renegotiation=False),
        dataclasses.replace(base, version=V(0x0303), cipher=Cipher.of(0x009C),
                            key_exchange=KeyExchange("RSA", "rsa", None, None, 256),
                            error="timed out", finished_verified=None),
        dataclasses.replace(base, version=V(0x0304), cipher=Cipher.of(0x1303),
                            key_exchange=KeyExchange("ECDHE", "key_share", G(0x1D), 32, 32,
                                                     253, server_temp_key="X25519, 253 bits"),
                            signature_verified=None, signature_detail="no CertificateVerify",
                            messages=(">>> ClientHello", "<<< ServerHello",
                                      "<<< EncryptedExtensions", "<<< Certificate")),
        dataclasses.replace(base, host="127.0.0.2", version=None, cipher=None,
                            error="connection refused", error_kind="network"),
        dataclasses.replace(base, version=V(0x0303), cipher=Cipher.of(0xC02F),
                            key_exchange=KeyExchange("ECDHE", "not_captured", None),
                            handshake_complete=False),
        # ended early: what would have come later is not known, not absent
        dataclasses.replace(base, version=V(0x0303), cipher=Cipher.of(0xC02F),
                            key_exchange=KeyExchange("ECDHE", "not_reached", None),
                            ocsp_stapling="announced (status_request); the handshake ended "
                            "before its CertificateStatus", error="alert handshake_failure",
                            messages=(">>> ClientHello", "<<< ServerHello", "<<< Certificate")),
        dataclasses.replace(base, version=V(0x0304), cipher=Cipher.of(0x1301),
                            key_exchange=KeyExchange("ECDHE", "key_share", G(0x1D), 32, 32,
                                                     253, server_temp_key="X25519, 253 bits"),
                            error="alert handshake_failure",
                            messages=(">>> ClientHello", "<<< ServerHello")),
    ]


def test_probe_summary(golden, terminal) -> None:
    states = {f"probe_state_{i}": r for i, r in enumerate(probe_states())}
    for name, result in (("probe_tls13", probe_tls13()), ("probe_tls12_weak", probe_tls12_weak()),
                         *states.items()):
        plain, full = io.StringIO(), io.StringIO()
        render_probe(result, plain)
        render_probe(result, full, full=True)
        render_probe(result, terminal)
        golden.text(f"{name}.txt", "--- pipe ---\n" + plain.getvalue() +
                    "--- pipe, --full ---\n" + full.getvalue() +
                    "--- terminal, 100 columns ---\n" + terminal.getvalue())
        terminal.seek(0)
        terminal.truncate()


@pytest.fixture
def captures(tmp_path: Path) -> Path:
    """captures/ copied into the CLI's working folder (run_cli's tmp_path), so that the
    files are named "captures/NAME.pcap" in the output wherever the repository is."""
    shutil.copytree(CAPTURES, tmp_path / "captures")
    return Path("captures")


def test_msg_trace(golden, run_cli, captures) -> None:
    """The --msg trace of recorded handshakes (TLS 1.3 with HelloRetryRequest, decrypted;
    TLS 1.2 DHE): the lines the live probe prints for its own records."""
    for name in ("tls13_hrr", "tls12_dhe"):
        code, out, err = run_cli("pcap", captures / f"{name}.pcap", "--keylog",
                                 captures / f"{name}.keys", "--msg")
        assert (code, err) == (0, "")
        golden.text(f"msg_{name}.txt", out)


def audit_report() -> AuditReport:
    """A scan's report with every section: versions (one inconclusive), groups with fixed
    small DH parameters, suites (weak and without forward secrecy), signature schemes,
    post-quantum verdicts, an untrusted chain, an inconsistent target, checks; findings of
    the built-in rules and of the intermediate policy, one of them waived."""
    versions = (VersionSupport(V(0x0304), "supported", "ServerHello TLS 1.3"),
                VersionSupport(V(0x0303), "supported", "ServerHello TLS 1.2"),
                VersionSupport(V(0x0302), "inconclusive", "connection reset twice"),
                VersionSupport(V(0x0301), "supported", "ServerHello TLS 1.0"),
                VersionSupport(V(0x0300), "not_supported", "alert handshake_failure (40)"))
    dhe = DheAudit("fixed", fixed=DhParameters("modp_1024", 1024, None, "RFC 2409",
                                                 "known", "modp_1024"),
                   connections=1, notes=("the server ignores the client's ffdhe groups",))
    dhe12 = DheAudit("negotiated", negotiated=(G(0x0100), G(0x0101)), order="server")
    groups = (GroupAudit(V(0x0304), True, "hello_retry_request",
                         supported=(G(0x1D), G(0x17), G(0x1E), G(0x0100)),
                         not_supported=(G(0x11EC),), inconclusive=(G(0x18),), order="server",
                         connections=12, notes=("secp384r1: the connection was reset",)),
              GroupAudit(V(0x0303), True, "server_key_exchange", supported=(G(0x1D), G(0x17)),
                         order="client", dhe=dhe, connections=9, certificate_curve=None),
              GroupAudit(V(0x0301), True, "server_key_exchange", supported=(G(0x17),),
                         order="single", dhe=dhe12, connections=3))
    x25519 = ("ECDHE", 253, "ECDH 253", G(0x1D), "key_share", "ok")
    kx = {0x1301: x25519, 0x1302: x25519, 0x009C: ("RSA", 2048, "RSA 2048", None,
                                                   "certificate", "ok"),
          0xC02F: ("ECDHE", 256, "ECDH 256", G(0x17), "server_key_exchange", "ok"),
          0x000A: ("RSA", 2048, "RSA 2048", None, "certificate", "ok"),
          0x0005: ("RSA", None, "unknown", None, None, "unknown"),
          0x009E: ("DHE", 1024, "DH 1024", None, "server_key_exchange", "weak")}
    why = {0x000A: ("3DES",), 0x0005: ("RC4",), 0x009E: ("DH 1024: under 2048 bits",)}

    def rows(*codes: int) -> tuple[SuiteRow, ...]:
        return tuple(SuiteRow(Cipher.of(c), *kx[c][:5], kx_strength=KxStrength(kx[c][5]),
                              weak=c in why, weak_reasons=why.get(c, ())) for c in codes)

    suites = (SuiteAudit(V(0x0304), (Cipher.of(0x1301), Cipher.of(0x1302)), "server",
                         connections=3, rows=rows(0x1301, 0x1302)),
              SuiteAudit(V(0x0303), tuple(Cipher.of(c) for c in (0x009C, 0xC02F, 0x000A,
                                                                  0x0005, 0x009E)),
                         "client", connections=7,
                         rows=rows(0x009C, 0xC02F, 0x000A, 0x0005, 0x009E)),
              SuiteAudit(V(0x0301), (Cipher.of(0xC013),), "single", complete=False,
                         notes=("elimination stopped: a reset",)))
    sigalgs = (SigalgAudit(V(0x0304), "established", (S(0x0804), S(0x0805)), "client",
                           connections=4),
               SigalgAudit(V(0x0303), "inconclusive", reason="the server always chose one"))
    pq = (PqVerdict("capability", "X25519MLKEM768", "no", "not supported"),
          PqVerdict("tolerance", "X25519MLKEM768 + X25519 shares", "no",
                    "alert handshake_failure (40)"),
          PqVerdict("browser_like", "X25519MLKEM768 + X25519 shares", "no",
                    "the server picked x25519 although it supports X25519MLKEM768"))
    checks = (CheckResult("heartbleed", "Heartbleed (CVE-2014-0160)", Verdict.not_vulnerable,
                          "no heartbeat extension", method="active", connections=1),
              CheckResult("sweet32", "64-bit block ciphers (SWEET32)", Verdict.vulnerable,
                          "TLS 1.2 accepts a 64-bit block cipher",
                          ("TLS 1.2: TLS_RSA_WITH_3DES_EDE_CBC_SHA",), code="check.sweet32",
                          severity="medium"),
              CheckResult("grease", "unknown values (RFC 8701)", Verdict.inconclusive,
                          "the connection was reset", method="active", connections=2,
                          category="tolerance"))
    report = AuditReport(
        host="example.com", port=443, address="192.0.2.1", versions=versions, groups=groups,
        suites=suites, signature_schemes=sigalgs, post_quantum=pq,
        certificates=(_cert(0, ("example.com",), not_after="2020-06-01T00:00:00+00:00"),
                      _cert(1, signature="sha1WithRSAEncryption"), _cert(2)),
        trust=TrustCheck("untrusted", 19, "self-signed certificate in certificate chain",
                         "the server sent the root", "example.com", True, "/etc/ssl/certs"),
        consistency=ConsistencyCheck("inconsistent", "the versions check's TLS 1.3 hello",
                                     ("versions: TLS 1.3, TLS_AES_128_GCM_SHA256, x25519",
                                      "groups: TLS 1.3, TLS_AES_256_GCM_SHA384, x25519"),
                                     ("suites",), ("two answers",)),
        policies=("intermediate",), check_results=checks,
        connections={"versions": 6, "groups TLS 1.3": 12, "check heartbleed": 1},
        total_connections=19, retries=2, duration_s=3.5)
    policy = load_policy("intermediate")
    waiving = dataclasses.replace(policy, name="lenient", waive={"suite.no_forward_secrecy":
                                                                 "legacy clients"})
    return with_findings(report, [policy, waiving])


def test_scan_report(golden, terminal) -> None:
    r = audit_report()
    plain, full = io.StringIO(), io.StringIO()
    render_audit(r, plain)
    render_audit(r, full, full=True)
    render_audit(r, terminal)
    summary = io.StringIO()
    render_summary([r, AuditReport("bad.example", 443, error="connection refused",
                                   error_kind="network")], 1, "findings at or above medium",
                   summary)
    golden.text("scan_report.txt", "--- pipe ---\n" + plain.getvalue() +
                "--- pipe, --full ---\n" + full.getvalue() +
                "--- terminal, 100 columns ---\n" + terminal.getvalue() +
                "--- summary ---\n" + summary.getvalue())


#: recorded captures with their keys: every kind of handshake the lab serves
PCAPS = ("tls13_hrr", "tls12_dhe", "tls12_rsa", "tls12_resumption", "tls12_alert",
         "tls13_encrypted_alert", "tls13_mlkem768", "tls12_split_gap", "tls12_unknown_ca",
         "tls12_x25519_midstream")


def _keylog(name: str, folder: Path = Path("captures")) -> list[Path]:
    return [folder / f"{name}.keys"] if (CAPTURES / f"{name}.keys").is_file() else []


def test_pcap_table(golden, run_cli, captures, terminal) -> None:
    """The connection table of several captures (a File column), on a pipe and on a
    100-column terminal (one record per row when the columns do not fit); the table of one
    capture (no File column) on a terminal wide enough for its columns."""
    code, out, err = run_cli("pcap", *[captures / f"{n}.pcap" for n in PCAPS])
    assert code == 0, err
    from tlsprobe.api import read_capture
    rows = [connection_row(r) for name in PCAPS for r in
            read_capture(CAPTURES / f"{name}.pcap", *_keylog(name, CAPTURES))]
    render_connections(rows, terminal)
    wide = type(terminal)()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("COLUMNS", "200")
        render_connections(rows[:3], wide)
    golden.text("pcap_table.txt", "--- pipe ---\n" + out + "--- terminal, 100 columns ---\n"
                + terminal.getvalue() + "--- terminal, 200 columns ---\n" + wide.getvalue())


def test_pcap_details(golden, run_cli, captures, terminal) -> None:
    """--details of each capture (the labels of the probe's summary), decrypted where the
    keys are recorded; the terminal form of one."""
    parts = []
    for name in PCAPS:
        keys = _keylog(name)
        code, out, err = run_cli("pcap", captures / f"{name}.pcap",
                                 *(["--keylog", keys[0]] if keys else []), "--details")
        parts.append(f"--- {name} ---\n" + out)
    from tlsprobe.api import read_capture
    for r in read_capture(CAPTURES / "tls13_hrr.pcap", CAPTURES / "tls13_hrr.keys"):
        render_details(dataclasses.replace(r, file="captures/tls13_hrr.pcap"), terminal)
    parts.append("--- tls13_hrr, terminal, 100 columns ---\n" + terminal.getvalue())
    golden.text("pcap_details.txt", "".join(parts))


def timing_report() -> TimingReport:
    """A timing run: ranked entries in two versions (one pinned suite), a refused group, a
    group not run, failures, a note and an early stop."""
    def entry(label: str, group: int, samples: list[float], version: int = 0x0304,
              **kw: object) -> EntryTiming:
        def stats(scale: float) -> Stats | None:
            return Stats.of([s * scale for s in samples])
        return EntryTiming(version=V(version), group=G(group), label=label, status=MEASURED,
                           runs=len(samples), connect_ms=stats(0.1), handshake_ms=stats(1.0),
                           total_ms=stats(1.1), client_cpu_ms=stats(0.4), wait_ms=stats(0.6),
                           client_kex_ms=samples[0] * 0.05,
                           handshakes_per_s=1000 / (sorted(samples)[len(samples) // 2] * 1.1),
                           samples_ms=tuple(samples), **kw)  # type: ignore[arg-type]
    fast = entry("x25519 (0x001d)", 0x1D, [1.0 + i / 50 for i in range(20)])
    close = entry("secp256r1 (0x0017)", 0x17, [1.05 + i / 50 for i in range(20)],
                  failures=2, detail="connection reset")
    slow = entry("ffdhe2048 (0x0100)", 0x100, [20.0 + i for i in range(20)])
    pinned = entry("x25519 (0x001d)", 0x1D, [150.0 + i for i in range(5)], version=0x0303,
                   offered_suite=Cipher.of(0xC02F), cipher_suite=Cipher.of(0xC02F))
    refused = EntryTiming(version=V(0x0304), group=G(0x1E), label="x448 (0x001e)",
                          status=REFUSED, detail="alert handshake_failure (40)")
    skipped = EntryTiming(version=V(0x0304), group=G(0x11EC), label="X25519MLKEM768 (0x11ec)",
                          status=NOT_RUN, detail="the run stopped")
    entries, rankings = rank([slow, refused, close, fast, pinned, skipped])
    return TimingReport(host="::1", port=8443, address="::1", runs=20, warmup=2,
                        timeout_s=5.0, entries=tuple(entries), rankings=tuple(rankings),
                        stopped="the total time limit (60 s) was reached",
                        notes=("the server answered \x07 slowly",), duration_s=60.0)


def test_timing_table(golden, terminal) -> None:
    r = timing_report()
    plain, narrow = io.StringIO(), io.StringIO()
    render_timing(r, plain)
    render_timing(r, narrow, width=60)
    render_timing(r, terminal)
    golden.text("timing_table.txt", "--- pipe ---\n" + plain.getvalue() +
                "--- pipe, width 60 ---\n" + narrow.getvalue() +
                "--- terminal, 100 columns ---\n" + terminal.getvalue())


#: third-party captures (../shared/captures) with what the lab's do not have: SSL 2.0,
#: OpenVPN and RDP framing, STARTTLS preambles, DTLS, QUIC, a NULL cipher, a non-ASCII ALPN
CORPUS = ("wireshark/notes/ssl3/sslv2.pcapng", "wireshark/notes/tls/tls-null.pcapng",
          "wireshark/wiki/SampleCaptures/OpenVPN_TCP_tls-auth.pcapng",
          "wireshark/wiki/SampleCaptures/rdp-ssl.pcap.gz",
          "wireshark/test-captures/snakeoil-dtls.pcap",
          "suricata-verify/tests/smtp-startssl/input.pcap",
          "suricata-verify/tests/ldap-starttls/input.pcap",
          "suricata-verify/tests/pgsql/pgsql-upgrade-tls/input.pcap",
          "ja4/pcap/quic-tls-handshake.pcapng", "ja4/pcap/tls-non-ascii-alpn.pcapng",
          "ja4/pcap/badcurveball.pcap")


def test_pcap_details_of_the_shared_corpus(golden, run_cli, captures_dir: Path,
                                           tmp_path: Path) -> None:
    parts = []
    for name in CORPUS:
        (tmp_path / CORPUS_DIR / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(captures_dir / name, tmp_path / CORPUS_DIR / name)
        code, out, err = run_cli("pcap", f"shared/{name}", "--details")
        parts.append(f"--- {name}: exit {code}\n{out}{err}")
    code, out, err = run_cli("pcap", *[f"shared/{name}" for name in CORPUS])
    parts.append(f"--- table: exit {code}\n{out}{err}")
    golden.text("pcap_details_corpus.txt", _library_reason("".join(parts)))


def _library_reason(text: str) -> str:
    """cryptography's own reason for a key it cannot load (badcurveball's explicit curve)
    changes between its releases, and with it the wrapping: one placeholder instead."""
    return re.sub(r"unsupported key \([^()]*\);\s*", "unsupported key (<cryptography's "
                  "reason>); ", text)
