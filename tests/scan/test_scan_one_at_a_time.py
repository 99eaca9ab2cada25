"""A server that serves one connection at a time loses no verdict to the default `scan`.

`openssl s_server` without `-www` accepts one connection and serves it until it closes; the
others wait in the listen backlog, unanswered. The default scan (--per-host 3) must notice
that (a connection unanswered while another was open, answered alone), give the target one
connection at a time and ask the lost connections again, so that it establishes every
verdict `--per-host 1` establishes, in about the same time. A server that takes parallel
connections keeps them (counted by a relay in front of it).
"""
from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.helpers.faultproxy import pipe, serve_loopback
from tests.lab_servers.builders import build_command
from tests.lab_servers.certs import CertFiles, CertSet
from tests.helpers.servers import _LIVE, Server, ServerConfig, _free_port, _wait_listen

pytestmark = pytest.mark.needs_impl("openssl")
TIMEOUT = 3.0    # the scans' --timeout: what a connection left waiting costs


def must_staple_leaf(certs: CertSet, out: Path) -> CertFiles:
    """A leaf that demands OCSP stapling (TLS Feature status_request), valid 500 days: the
    server staples nothing, so must_staple (and cert_lifetime) are truly vulnerable."""
    ca_key = serialization.load_pem_private_key((certs.directory / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.datetime.now(datetime.timezone.utc) - timedelta(hours=1)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + timedelta(days=500))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                False)
            .add_extension(x509.TLSFeature([x509.TLSFeatureType.status_request]), False)
            .sign(ca_key, hashes.SHA256()))   # type: ignore[arg-type]
    files = CertFiles(out / "staple.crt", out / "staple.key", out / "staple_chain.crt")
    pem = cert.public_bytes(serialization.Encoding.PEM)
    files.cert.write_bytes(pem)
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    files.chain.write_bytes(pem + certs.ca.read_bytes())
    return files


@pytest.fixture(scope="module")
def one_at_a_time(certs: CertSet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """openssl s_server without -www (TLS 1.2 and 1.3, RSA key exchange too, so that robot
    runs): one connection at a time. Its stdin is a pipe left open: at end of input
    s_server would stop listening."""
    out = tmp_path_factory.mktemp("one-at-a-time")
    mine = CertSet(certs.directory, certs.ca, {"staple": must_staple_leaf(certs, out)})
    config = ServerConfig("openssl", None, "ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA", None,
                          "both", True, "staple", None, "127.0.0.1", ())
    port = _free_port("127.0.0.1")
    argv, env, _ = build_command(config, port, mine, out)
    argv.remove("-www")
    log_path = out / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=log,
                                stderr=subprocess.STDOUT, env=env, cwd=out,
                                start_new_session=True)
    server = Server(config, port, proc, out, log_path)
    _LIVE.add(server)
    try:
        assert _wait_listen(port, proc, 20.0, "127.0.0.1", log_path), server.log_tail()
        yield port
    finally:
        server.stop()
        if proc.stdin is not None:
            proc.stdin.close()


def scan(run_cli: Any, port: int, *options: str) -> dict[str, Any]:
    """A default scan (every check) of 127.0.0.1:port as its JSON object."""
    got = run_cli("scan", f"127.0.0.1:{port}", "--json", "--no-progress", "--timeout",
                  str(TIMEOUT), *options, timeout=90)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout.splitlines()[-1])


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    """Everything the audit established, by name: versions, groups, suites, signature
    schemes, post-quantum verdicts, the chain's trust and every check's verdict."""
    got: dict[str, Any] = {f"version {v['version']['name']}": v["status"]
                           for v in report["versions"]}
    for g in report["groups"]:
        got[f"groups {g['version']['name']}"] = (g["spoken"],
                                                 sorted(c["name"] for c in g["supported"]))
    for s in report["suites"]:
        got[f"suites {s['version']['name']}"] = [c["id"] for c in s["supported"]] \
            if s["complete"] else "inconclusive"
    for s in report["signature_schemes"]:
        got[f"sigalgs {s['version']['name']}"] = s["status"] if s["status"] == "inconclusive" \
            else sorted(c["name"] for c in s["supported"])
    for p in report["post_quantum"]:
        got[f"pq {p['check']} {p['subject']}"] = p["verdict"]
    got["trust"] = (report["trust"] or {}).get("status", "inconclusive")
    for c in report["check_results"]:
        got[f"check {c['name']}"] = c["verdict"]
    return got


def established(value: Any) -> bool:
    return value not in ("inconclusive", None) and \
        not (isinstance(value, tuple) and value[0] is None)


def test_a_one_connection_server_loses_no_verdict_that_per_host_1_gets(run_cli: Any,
                                                                       one_at_a_time: int
                                                                       ) -> None:
    alone = scan(run_cli, one_at_a_time, "--per-host", "1")
    default = scan(run_cli, one_at_a_time)
    want, got = verdicts(alone), verdicts(default)
    assert want["check must_staple"] == "vulnerable", alone["check_results"]
    lost = {name: (value, got.get(name)) for name, value in want.items()
            if established(value) and got.get(name) != value}
    assert not lost, (lost, [c for c in default["check_results"]
                             if c["verdict"] == "inconclusive"])
    # the target was found to take one connection at a time, and said so
    assert "answered alone" in default.get("one_at_a_time", ""), default
    assert "one_at_a_time" not in alone   # never crowded: nothing to notice
    # and with about the work --per-host 1 does: the target is found out within the first
    # wave of the default 3 connections at once, whose lost connections (each one wait of
    # --timeout) are retried once; otherwise the same connections (counted, not timed: a
    # busy machine stretches both runs' wall time)
    counts = {k: (default[k], alone[k]) for k in ("total_connections", "retries")}
    assert default["retries"] <= 3, counts
    assert default["total_connections"] <= alone["total_connections"] + default["retries"] + 3, \
        counts


class CountingRelay:
    """A loopback relay to `backend` that counts the connections waiting for the server's
    first bytes at once (from accept until those bytes go to the client: a span inside the
    client's own connection, so never more than the client had open)."""

    def __init__(self, backend: tuple[str, int]) -> None:
        self.backend = backend
        self.waiting = self.most = 0
        self.lock = threading.Lock()
        self.sock, self.port = serve_loopback(self._accept)

    def _accept(self, conn: socket.socket) -> None:
        with self.lock:
            self.waiting += 1
            self.most = max(self.most, self.waiting)
        threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        counted = [True]

        def answered() -> None:
            with self.lock:
                if counted[0]:
                    self.waiting -= 1
                    counted[0] = False
        try:
            upstream = socket.create_connection(self.backend, timeout=10)
        except OSError:
            answered()
            conn.close()
            return
        t = threading.Thread(target=pipe, args=(upstream, conn, answered), daemon=True)
        t.start()
        pipe(conn, upstream)
        t.join(10)
        answered()
        conn.close()
        upstream.close()

    def close(self) -> None:
        self.sock.close()


def test_a_parallel_server_keeps_its_parallel_connections(run_cli: Any, server_cache: Any
                                                          ) -> None:
    """The same default scan of openssl s_server -www (a connection per client): the
    per-host cap of 3 is used all along, and nothing is reported one at a time."""
    srv = server_cache("openssl", ciphers="ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA",
                       serverpref=True)
    relay = CountingRelay((srv.host, srv.port))
    try:
        report = scan(run_cli, relay.port)
    finally:
        relay.close()
    assert "one_at_a_time" not in report, report["one_at_a_time"]
    assert 2 <= relay.most <= 3, relay.most
    assert report["retries"] == 0


def test_the_reports_say_why_a_target_got_one_connection_at_a_time() -> None:
    from tlsprobe.model.audit import AuditReport
    from tlsprobe.report.audit_tables import connections_line
    from tlsprobe.report.html import audit_html
    report = AuditReport("127.0.0.1", 443, total_connections=9, retries=1,
                         one_at_a_time="a connection went unanswered while another was open")
    assert connections_line(report).endswith("; 1 retry after a reset or timeout; one at a "
                                             "time: a connection went unanswered while another "
                                             "was open")
    assert "one at a time: a connection went unanswered" in audit_html(report)
    assert json.loads(report.to_json())["one_at_a_time"].startswith("a connection went")
    assert "one_at_a_time" not in json.loads(AuditReport("127.0.0.1", 443).to_json())
