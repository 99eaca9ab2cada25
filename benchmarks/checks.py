#!/usr/bin/env python3
"""The checks of `tlsprobe scan --checks all` beside testssl.sh and sslyze, on the same
local servers: per check and server each tool's verdict, and each tool's wall time.

Servers (tests/helpers/servers.py, loopback only): a modern openssl s_server (TLS 1.2 and 1.3,
default suites, -www) and a weak one (TLS 1.0-1.3, DHE with the 1536-bit RFC 3526 prime,
anonymous and NULL suites, CBC in TLS 1.0, through @SECLEVEL=0; the configuration of
tests/checks/test_checks_servers.py). Tools:

- tlsprobe: `python -m tlsprobe scan HOST:PORT --checks all --json`;
- testssl.sh (Debian package `testssl.sh`, command `testssl`): `testssl -U -s -S -h
  --jsonfile` (vulnerabilities, cipher categories, server defaults with the certificate,
  HTTP headers); skipped with a note when absent;
- sslyze: looked up as --sslyze, `sslyze` on PATH, then /tmp/sslyze-venv/bin/sslyze
  (sslyze pins its own `cryptography`: python -m venv /tmp/sslyze-venv &&
  /tmp/sslyze-venv/bin/pip install sslyze); every scan command but the Mozilla
  configuration check, plus --http_headers.

A peer's cell is its own verdict mapped onto tlsprobe's words where it gives one (testssl's
severity OK = not vulnerable, LOW..CRITICAL = vulnerable, its wording for features), read
from its accepted-suite lists for the suite-based checks (sslyze), "-" where the tool has no
such check. docs/CHECKS.md ("Peers side by side") says who is right where they differ.

    python benchmarks/checks.py [--skip testssl] [--sslyze PATH] [--timeout 900]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WEAK = dict(proto="all", dhparam="modp1536",
            ciphers="ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256:AES128-SHA"
                    ":ADH-AES128-GCM-SHA256:NULL-SHA256:@SECLEVEL=0")
SERVERS: dict[str, dict[str, Any]] = {"modern": dict(proto="both"), "weak": WEAK}

# tlsprobe check -> testssl id (and how its finding reads as a verdict)
TESTSSL = {"poodle": "POODLE_SSL", "freak": "FREAK", "logjam": "LOGJAM",
           "dh": "LOGJAM-common_primes", "rc4": "RC4", "sweet32": "SWEET32", "beast": "BEAST",
           "null": "cipherlist_NULL", "anon": "cipherlist_aNULL", "fallback": "fallback_SCSV",
           "heartbleed": "heartbleed", "ccs": "CCS", "ccs_injection": "CCS",
           "ticketbleed": "ticketbleed", "robot": "ROBOT", "crime": "CRIME_TLS",
           "compression": "CRIME_TLS", "secure_renegotiation": "secure_renego",
           "client_renegotiation": "secure_client_renego", "drown": "DROWN",
           "hsts": "HSTS", "breach": "BREACH", "server_banner": "banner_server",
           "cert_lifetime": "cert_validityPeriod", "sct": "certificate_transparency",
           "key_usage": "cert_keyUsage", "must_staple": "cert_mustStapleExtension",
           "banners": "banner_application", "security_headers": "X-Content-Type-Options",
           "cookies": "cookie_count", "clock_skew": "HTTP_clock_skew",
           "lucky13": "LUCKY13", "tls_timestamp": "TLS_timestamp"}


def _testssl_http(check: str, by_id: dict[str, dict[str, str]]) -> str | None:
    """The HTTP checks testssl.sh's -h reports without one verdict id of the same meaning
    (its header ids are one per header, its cookie and banner ids split in two)."""
    def text(key: str) -> str:
        return by_id.get(key, {}).get("finding", "")
    if check == "banners":
        none = text("banner_application").startswith("No application banner") and \
            text("banner_reverseproxy") in ("", "--")
        return "not supported" if none else "supported"
    if check == "security_headers":
        if "security_headers" in by_id:     # testssl's "--": none of its list
            return "not supported"
        return "(listed, no verdict)"
    if check == "cookies":
        if text("cookie_count").startswith("0 "):
            return "not applicable"
        return "not vulnerable" if text("cookie_secure").startswith("All") else "vulnerable"
    if check == "clock_skew":
        got = text("HTTP_clock_skew")
        return "not applicable" if got.startswith("Got no HTTP time") else f"({got[:24]})"
    return None


def testssl_verdict(check: str, by_id: dict[str, dict[str, str]]) -> str:
    http = _testssl_http(check, by_id)
    if http is not None:
        return http
    f = by_id.get(TESTSSL.get(check, ""))
    if f is None:
        return "-"
    sev, text = f.get("severity", ""), f.get("finding", "")
    if check == "hsts":
        return "not supported" if text.startswith("not offered") else "supported"
    if check == "server_banner":
        return "not supported" if text.startswith("No Server banner") else "supported"
    if check == "sct":
        return "not supported" if text in ("--", "no") else "supported"
    if check == "must_staple":
        if text == "--":
            return "not applicable"
        stapled = by_id.get("OCSP_stapling", {}).get("finding", "").startswith("offered")
        return "not vulnerable" if stapled else "vulnerable"
    if check == "cert_lifetime":
        return "not vulnerable" if text == "No finding" else f"vulnerable ({text[:24]})"
    if check == "dh":   # INFO: a well-known prime of 2048 bits or more, no finding
        return "not vulnerable" if sev in ("OK", "INFO") else "vulnerable"
    if check == "key_usage":
        return "(listed, no verdict)"
    if check == "lucky13":   # LOW "potentially vulnerable": tlsprobe's inconclusive
        return "potentially vuln." if sev == "LOW" else "not vulnerable"
    if check == "tls_timestamp":
        return "supported" if text == "random" else f"not supported ({text[:14]})"
    if sev == "OK":
        return "not applicable" if "no protocol below" in text else "not vulnerable"
    if sev in ("LOW", "MEDIUM", "HIGH", "CRITICAL"):
        return "vulnerable"
    if sev == "WARN":
        return "inconclusive"
    return f"({text[:26]})"


def _accepted(r: dict[str, Any], key: str) -> list[str]:
    res = (r.get(key) or {}).get("result") or {}
    return [s["cipher_suite"]["name"] for s in res.get("accepted_cipher_suites", [])]


def _all_accepted(r: dict[str, Any]) -> list[str]:
    return [n for k in ("ssl_3_0_cipher_suites", "tls_1_0_cipher_suites",
                        "tls_1_1_cipher_suites", "tls_1_2_cipher_suites",
                        "tls_1_3_cipher_suites") for n in _accepted(r, k)]


def _suites(pred: Callable[[str], bool], keys: Callable[[dict[str, Any]], list[str]]
            ) -> Callable[[dict[str, Any]], str]:
    return lambda r: "vulnerable" if any(pred(n) for n in keys(r)) else "not vulnerable"


def _res(r: dict[str, Any], key: str) -> dict[str, Any]:
    return (r.get(key) or {}).get("result") or {}


def _leaf(r: dict[str, Any]) -> dict[str, Any]:
    deployments = _res(r, "certificate_info").get("certificate_deployments") or [{}]
    return deployments[0]


def _yes(value: Any, yes: str, no: str) -> str:
    return "inconclusive" if value is None else (yes if value else no)


SSLYZE: dict[str, Callable[[dict[str, Any]], str]] = {
    "poodle": _suites(lambda n: "CBC" in n, lambda r: _accepted(r, "ssl_3_0_cipher_suites")),
    "rc4": _suites(lambda n: "RC4" in n, _all_accepted),
    "sweet32": _suites(lambda n: "3DES" in n or "_DES_" in n or "IDEA" in n, _all_accepted),
    "beast": _suites(lambda n: "CBC" in n, lambda r: _accepted(r, "tls_1_0_cipher_suites")),
    "null": _suites(lambda n: "WITH_NULL" in n, _all_accepted),
    "anon": _suites(lambda n: "_anon_" in n, _all_accepted),
    "freak": _suites(lambda n: "EXPORT" in n and n.startswith("TLS_RSA"), _all_accepted),
    "logjam": _suites(lambda n: "EXPORT" in n and "DH" in n, _all_accepted),
    "fallback": lambda r: _yes(_res(r, "tls_fallback_scsv").get("supports_fallback_scsv"),
                               "not vulnerable", "vulnerable"),
    "heartbleed": lambda r: _yes(_res(r, "heartbleed").get("is_vulnerable_to_heartbleed"),
                                 "vulnerable", "not vulnerable"),
    "robot": lambda r: str(_res(r, "robot").get("robot_result", "-")).lower(),
    "hsts": lambda r: "-" if not _res(r, "http_headers") else _yes(
        _res(r, "http_headers").get("strict_transport_security_header") is not None,
        "supported", "not supported"),
    "sct": lambda r: _yes(_leaf(r).get("leaf_certificate_signed_certificate_timestamps_count"),
                          "supported", "not supported"),
    "must_staple": lambda r: "not applicable" if not _leaf(r).get(
        "leaf_certificate_has_must_staple_extension") else _yes(
        _leaf(r).get("ocsp_response") is not None, "not vulnerable", "vulnerable"),
}
for _name in ("ccs", "ccs_injection"):
    SSLYZE[_name] = lambda r: _yes(_res(r, "openssl_ccs_injection").get(
        "is_vulnerable_to_ccs_injection"), "vulnerable", "not vulnerable")
for _name in ("crime", "compression"):
    SSLYZE[_name] = lambda r: _yes(_res(r, "tls_compression").get("supports_compression"),
                                   "vulnerable", "not vulnerable")


def timed(argv: list[str], timeout: float, env: dict[str, str] | None = None
          ) -> tuple[float, subprocess.CompletedProcess[str] | None]:
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return time.monotonic() - start, None
    return time.monotonic() - start, proc


def run_tlsprobe(port: int, timeout: float) -> tuple[float, dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    wall, proc = timed([sys.executable, "-m", "tlsprobe", "scan", f"127.0.0.1:{port}",
                        "--checks", "all", "--json"], timeout, env)
    if proc is None or not proc.stdout.strip():
        return wall, {}
    d = json.loads(proc.stdout)
    d = d[0] if isinstance(d, list) else d
    return wall, {c["name"]: c["verdict"] for c in d.get("check_results", [])}


def run_testssl(binary: str, port: int, timeout: float, work: Path
                ) -> tuple[float, dict[str, dict[str, str]] | None]:
    out = work / f"testssl-{port}.json"
    wall, proc = timed([binary, "--jsonfile", str(out), "--warnings", "off", "--ip", "one",
                        "--quiet", "--color", "0", "-U", "-s", "-S", "-h",
                        f"127.0.0.1:{port}"],
                       timeout)
    if proc is None or not out.exists():
        return wall, None
    return wall, {f["id"]: f for f in json.loads(out.read_text())}


def run_sslyze(binary: str, port: int, timeout: float, work: Path
               ) -> tuple[float, dict[str, Any] | None]:
    out = work / f"sslyze-{port}.json"
    commands = ["--certinfo", "--compression", "--reneg", "--robot", "--heartbleed",
                "--openssl_ccs", "--fallback", "--http_headers", "--elliptic_curves",
                "--sslv2", "--sslv3", "--tlsv1", "--tlsv1_1", "--tlsv1_2", "--tlsv1_3"]
    wall, proc = timed([binary, "--quiet", "--mozilla_config", "disable", *commands,
                        f"--json_out={out}", f"127.0.0.1:{port}"], timeout)
    if proc is None or not out.exists():
        return wall, None
    return wall, json.loads(out.read_text())["server_scan_results"][0]["scan_result"]


def find_sslyze(given: str | None) -> str | None:
    for cand in (given, shutil.which("sslyze"), "/tmp/sslyze-venv/bin/sslyze"):
        if cand and Path(cand).exists():
            return cand
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip", action="append", default=[], choices=["testssl", "sslyze"])
    ap.add_argument("--sslyze")
    ap.add_argument("--timeout", type=float, default=900.0, help="per tool run (s)")
    args = ap.parse_args()
    from tests.helpers.servers import start_server
    testssl = None if "testssl" in args.skip else (shutil.which("testssl") or
                                                   shutil.which("testssl.sh"))
    sslyze = None if "sslyze" in args.skip else find_sslyze(args.sslyze)
    notes = [] if testssl else ["testssl: not installed (Debian package `testssl.sh`) or "
                                "skipped"]
    notes += [] if sslyze else ["sslyze: not installed or skipped"]
    work = Path(tempfile.mkdtemp(prefix="tlsprobe-bench-checks-"))
    results: dict[str, dict[str, Any]] = {}
    for label, options in SERVERS.items():
        with start_server("openssl", **options) as srv:
            t_wall, t = run_tlsprobe(srv.port, args.timeout)
            ts_wall, ts = run_testssl(testssl, srv.port, args.timeout, work) if testssl \
                else (0.0, None)
            sy_wall, sy = run_sslyze(sslyze, srv.port, args.timeout, work) if sslyze \
                else (0.0, None)
        results[label] = dict(t=t, ts=ts, sy=sy, walls=(t_wall, ts_wall, sy_wall))
    checks = list(dict.fromkeys(n for r in results.values() for n in r["t"]))
    width = max([len(c) for c in checks] + [5])
    cell = 17
    head = f"{'check':<{width}}" + "".join(
        f" | {label + ': tlsprobe':<{cell}} {'testssl':<{cell}} {'sslyze':<{cell}}"
        for label in results)
    print(head)
    print("-" * len(head))
    for check in checks:
        row = f"{check:<{width}}"
        for r in results.values():
            t_v = r["t"].get(check, "-")
            ts_v = testssl_verdict(check, r["ts"]) if r["ts"] is not None else \
                ("n/a" if not testssl else "failed")
            sy_v = SSLYZE[check](r["sy"]) if r["sy"] is not None and check in SSLYZE else \
                ("-" if r["sy"] is not None else ("n/a" if not sslyze else "failed"))
            row += f" | {t_v[:cell]:<{cell}} {ts_v[:cell]:<{cell}} {sy_v[:cell]:<{cell}}"
        print(row)
    print("-" * len(head))
    row = f"{'wall time':<{width}}"
    for r in results.values():
        row += " | " + " ".join(f"{w:>{cell - 2}.1f} s" for w in r["walls"])
    print(row)
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
