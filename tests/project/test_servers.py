"""The loopback server fixtures do what they are asked: each implementation starts, negotiates
the configured version, suite and group (seen by independent clients: Python's ssl on the
system OpenSSL, pyOpenSSL on cryptography's OpenSSL, run in the lab environment), and stops
without leaving a process or a listening socket behind."""
from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from tests.helpers import lab_env
from tests.lab_servers.certs import dh_numbers
from tests.helpers.servers import (CertSet, Server, ServerConfig, ServerStartError, _wait_listen,
                     build_command, listening_inodes, start_server)

pytestmark = pytest.mark.servers

# Every group cryptography's OpenSSL can offer, so the result shows the server's choice alone.
ALL_GROUPS = ("X25519MLKEM768:SecP256r1MLKEM768:SecP384r1MLKEM1024:MLKEM512:MLKEM768:MLKEM1024:"
              "X25519:X448:P-256:P-384:P-521:brainpoolP256r1tls13:brainpoolP384r1tls13:"
              "brainpoolP512r1tls13:brainpoolP256r1:brainpoolP384r1:brainpoolP512r1:"
              "ffdhe2048:ffdhe3072:ffdhe4096:ffdhe6144:ffdhe8192")
# Canonical lab name -> what SSL_get0_group_name reports.
OPENSSL_GROUP_NAME = {"X25519": "x25519", "X448": "x448", "P-256": "secp256r1",
                      "P-384": "secp384r1", "P-521": "secp521r1"}


def pyopenssl_handshake(server: Server, ca: Path, *, groups: str | None = ALL_GROUPS,
                        versions: tuple[str, str] = ("tls1_2", "tls1_3"),
                        cipher_list: str | None = None) -> dict[str, Any]:
    """Handshake with pyOpenSSL (tests/lab_servers/pyopenssl_client.py, in the lab
    environment: tests/helpers/lab_env.py), verifying the chain; report version, suite, group, the
    peer chain and the raw ServerKeyExchange (if any)."""
    args = ["--host", server.host, "--port", str(server.port), "--ca", str(ca),
            "--min-version", versions[0], "--max-version", versions[1]]
    args += ["--groups", groups] if groups else []
    args += ["--cipher-list", cipher_list] if cipher_list else []
    result: dict[str, Any] = json.loads(lab_env.run_script("pyopenssl_client.py", args,
                                                           timeout=30))
    result["chain"] = [x509.load_pem_x509_certificate(pem.encode()) for pem in result["chain"]]
    if "server_key_exchange" in result:
        result["server_key_exchange"] = bytes.fromhex(result["server_key_exchange"])
    return result


def pyssl_handshake(server: Server, ca: Path, *, hostname: str = "localhost",
                    versions: tuple[str, str] = ("TLSv1_2", "TLSv1_3"),
                    ciphers: str | None = None) -> tuple[str | None, str]:
    """Handshake with Python's ssl (system OpenSSL) checking chain and host name."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(ca))
    ctx.minimum_version = getattr(ssl.TLSVersion, versions[0])
    ctx.maximum_version = getattr(ssl.TLSVersion, versions[1])
    if ciphers:
        ctx.set_ciphers(ciphers)
    with socket.create_connection(server.address, timeout=5) as sock, \
            ctx.wrap_socket(sock, server_hostname=hostname) as tls:
        cipher = tls.cipher()
        assert cipher is not None
        return tls.version(), cipher[0]


def assert_stopped(server: Server) -> None:
    """The PID is gone (reaped), nothing listens on the port and it can be bound again."""
    assert not server.alive()
    assert not os.path.exists(f"/proc/{server.pid}")
    holders = _holders(listening_inodes(server.port))
    # a listener left by the server's process group (a forked worker that outlived it) is
    # a failure; one of an unrelated process that took the freed port since is not ours
    assert not [pid for pid, pgid in holders if pgid == server.pid], holders
    if holders:
        return
    family = socket.AF_INET6 if ":" in server.host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((server.host, server.port))


def _holders(inodes: set[int]) -> list[tuple[int, int]]:
    """(pid, process group) of every process holding one of the socket `inodes`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
            pgid = os.getpgid(int(entry.name))
        except OSError:
            continue
        if any(t.startswith("socket:[") and int(t[8:-1]) in inodes for t in fds):
            found.append((int(entry.name), pgid))
    return found


# One group per implementation that its defaults would not pick on their own.
GROUP_CASES = [("openssl", "ffdhe2048"), ("gnutls", "P-384"), ("nginx", "P-521"),
               ("pyopenssl", "P-256"), ("tlslite", "SecP256r1MLKEM768"),
               ("pyssl", "X448")]


@pytest.mark.parametrize("impl,group", GROUP_CASES)
def test_starts_negotiates_group_and_stops(tls_server: Callable[..., Server], certs: CertSet,
                                           impl: str, group: str) -> None:
    server = tls_server(impl, groups=[group], proto="tls1_3")
    assert server.alive() and server.pid in _listening_pids(server.port)
    got = pyopenssl_handshake(server, certs.ca)
    assert got["version"] == "TLSv1.3"
    assert got["group"] == OPENSSL_GROUP_NAME.get(group, group)
    leaf, ca = got["chain"]
    assert leaf.subject.rfc4514_string() == "CN=localhost"
    assert ca.subject == ca.issuer == x509.load_pem_x509_certificate(certs.ca.read_bytes()).subject
    server.stop()
    assert_stopped(server)
    server.stop()  # idempotent


def _listening_pids(port: int) -> set[int]:
    inodes = {f"socket:[{i}]" for i in listening_inodes(port)}
    pids = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            if inodes & fds:
                pids.add(int(pid))
        except OSError:
            continue
    return pids


# (TLS 1.2 cipher option, TLS 1.3 option, as {ciphers, ciphersuites} per implementation)
SUITE_CASES = {
    "openssl": ({"ciphers": "ECDHE-RSA-AES128-GCM-SHA256"},
                {"ciphersuites": "TLS_CHACHA20_POLY1305_SHA256"}),
    "nginx": ({"ciphers": "ECDHE-RSA-AES128-GCM-SHA256"},
              {"ciphersuites": "TLS_CHACHA20_POLY1305_SHA256"}),
    "pyopenssl": ({"ciphers": "ECDHE-RSA-AES128-GCM-SHA256"},
                  {"ciphersuites": "TLS_CHACHA20_POLY1305_SHA256"}),
    "pyssl": ({"ciphers": "ECDHE-RSA-AES128-GCM-SHA256"},
              {"ciphersuites": "TLS_CHACHA20_POLY1305_SHA256"}),
    "gnutls": ({"ciphers": "NORMAL:-CIPHER-ALL:+AES-128-GCM:-KX-ALL:+ECDHE-RSA"},
               {"ciphers": "NORMAL:-CIPHER-ALL:+CHACHA20-POLY1305"}),
    "tlslite": ({"ciphers": "aes128gcm", "ciphersuites": "kx:ecdhe_rsa"},
                {"ciphers": "chacha20-poly1305"}),
}


@pytest.mark.parametrize("impl", sorted(SUITE_CASES))
def test_version_and_suite_as_configured(tls_server: Callable[..., Server], certs: CertSet,
                                         impl: str) -> None:
    tls12, tls13 = SUITE_CASES[impl]
    # The client allows both versions, so the server's limit decides.
    assert pyssl_handshake(tls_server(impl, proto="tls1_2", **tls12), certs.ca) == (
        "TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256")
    assert pyssl_handshake(tls_server(impl, proto="tls1_3", **tls13), certs.ca) == (
        "TLSv1.3", "TLS_CHACHA20_POLY1305_SHA256")


@pytest.mark.parametrize("impl,group", [
    ("pyopenssl", "MLKEM768"), ("pyopenssl", "SecP384r1MLKEM1024"),
    ("pyopenssl", "brainpoolP256r1tls13"), ("tlslite", "X25519MLKEM768"),
    ("tlslite", "brainpoolP384r1tls13")])
def test_post_quantum_and_brainpool_tls13(tls_server: Callable[..., Server], certs: CertSet,
                                          impl: str, group: str) -> None:
    server = tls_server(impl, groups=[group], proto="tls1_3")
    assert pyopenssl_handshake(server, certs.ca)["group"] == group
    # The server's own view agrees (tlslite spells the hybrids in lower case).
    own_name = group.lower() if impl == "tlslite" and "MLKEM" in group else group
    assert server.connections(wait_for=1)[-1].endswith(f" group={own_name}")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1 is deprecated:DeprecationWarning")
@pytest.mark.parametrize("impl,proto,expected", [
    ("openssl", "tls1_0", "TLSv1"), ("openssl", "tls1_1", "TLSv1.1"),
    ("gnutls", "tls1_1", "TLSv1.1"), ("tlslite", "tls1_0", "TLSv1"),
    ("nginx", "tls1_0-tls1_1", "TLSv1.1")])
def test_legacy_versions(tls_server: Callable[..., Server], certs: CertSet, impl: str,
                         proto: str, expected: str) -> None:
    server = tls_server(impl, proto=proto)
    version, _ = pyssl_handshake(server, certs.ca, versions=("TLSv1", "TLSv1_3"),
                                 ciphers="DEFAULT:@SECLEVEL=0")
    assert version == expected


def test_version_limit_refuses_other_versions(tls_server: Callable[..., Server],
                                              certs: CertSet) -> None:
    server = tls_server("openssl", proto="tls1_3")
    with pytest.raises(ssl.SSLError):
        pyssl_handshake(server, certs.ca, versions=("TLSv1_2", "TLSv1_2"))
    assert server.alive()


@pytest.mark.parametrize("impl", ["openssl", "nginx", "pyopenssl"])
def test_server_preference(tls_server: Callable[..., Server], certs: CertSet,
                           impl: str) -> None:
    server_order = "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"
    client_order = "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256"
    for serverpref, expected in ((True, "ECDHE-RSA-AES128-GCM-SHA256"),
                                 (False, "ECDHE-RSA-AES256-GCM-SHA384")):
        server = tls_server(impl, proto="tls1_2", ciphers=server_order, serverpref=serverpref)
        assert pyssl_handshake(server, certs.ca, ciphers=client_order)[1] == expected


@pytest.mark.parametrize("impl,kind", [("openssl", "ecdsa"), ("openssl", "ed25519"),
                                       ("gnutls", "ed25519"), ("nginx", "ecdsa"),
                                       ("tlslite", "ecdsa"), ("pyopenssl", "ed25519")])
def test_certificate_kinds(tls_server: Callable[..., Server], certs: CertSet, impl: str,
                           kind: str) -> None:
    server = tls_server(impl, cert=kind)
    key_type = {"ecdsa": ec.EllipticCurvePublicKey, "ed25519": ed25519.Ed25519PublicKey}[kind]
    leaf = pyopenssl_handshake(server, certs.ca)["chain"][0]
    assert isinstance(leaf.public_key(), key_type)
    assert leaf == x509.load_pem_x509_certificate(certs[kind].cert.read_bytes())
    assert not isinstance(leaf.public_key(), rsa.RSAPublicKey)


@pytest.mark.parametrize("impl", ["openssl", "gnutls", "nginx", "tlslite"])
def test_ipv6_loopback(tls_server: Callable[..., Server], certs: CertSet, impl: str) -> None:
    server = tls_server(impl, host="::1")
    assert server.address == ("::1", server.port)
    assert pyssl_handshake(server, certs.ca, hostname="::1")[0] == "TLSv1.3"  # IP SAN ::1
    server.stop()
    assert_stopped(server)


@pytest.mark.parametrize("impl", ["openssl", "nginx", "tlslite"])
def test_tls12_dhe_uses_named_dhparam(tls_server: Callable[..., Server], certs: CertSet,
                                      impl: str) -> None:
    ciphers = "aes128gcm" if impl == "tlslite" else "DHE-RSA-AES128-GCM-SHA256"
    extra = {"ciphersuites": "kx:dhe_rsa"} if impl == "tlslite" else {}
    server = tls_server(impl, proto="tls1_2", ciphers=ciphers, dhparam="ffdhe3072", **extra)
    # The client lists no ffdhe group: RFC 7919 servers (tlslite) must fall back to dhparam.
    got = pyopenssl_handshake(server, certs.ca, groups="X25519:P-256",
                              versions=("tls1_2", "tls1_2"))
    assert got["cipher"] == "DHE-RSA-AES128-GCM-SHA256"
    body = got["server_key_exchange"][4:]  # ServerDHParams: dh_p<1..2^16-1>, dh_g, dh_Ys
    p_len = int.from_bytes(body[:2], "big")
    prime = int.from_bytes(body[2:2 + p_len], "big")
    assert prime.bit_length() == 3072 and prime == dh_numbers("ffdhe3072")[0]
    assert prime >> 3008 == (1 << 64) - 1 and prime & ((1 << 64) - 1) == (1 << 64) - 1


@pytest.mark.needs_impl("openssl")
def test_start_failure_raises_with_log_tail(certs: CertSet, tmp_path: Path) -> None:
    with pytest.raises(ServerStartError, match="(?i)cipher"):
        start_server("openssl", ciphers="NO-SUCH-CIPHER", proto="tls1_2", certs=certs,
                     workdir=tmp_path)


@pytest.mark.needs_impl("gnutls")
def test_a_listener_on_the_other_family_alone_is_not_ready(certs: CertSet,
                                                           tmp_path: Path) -> None:
    # gnutls-serv binds 0.0.0.0 then ::; with the IPv4 port taken it listens on :: alone,
    # where a client of 127.0.0.1 is refused: that server is not ready, and the port is
    # said to be in use (start_server then tries another one)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        argv, env, _ = build_command(ServerConfig("gnutls", None, None, None, "both", False,
                                                  "rsa", None, "127.0.0.1", ()),
                                     port, certs, tmp_path)
        log = tmp_path / "server.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        try:
            assert not _wait_listen(port, proc, 20.0, "127.0.0.1", log)
            assert proc.poll() is None  # still running, on :: alone
            deadline = time.monotonic() + 10
            while not listening_inodes(port) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert listening_inodes(port, "::1") and not listening_inodes(port, "127.0.0.1")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("options,message", [
    ({"groups": ["X25519MLKEM768"]}, "cannot be configured"),
    ({"groups": ["X25519", "nope"]}, "unknown group"),
    ({"host": "0.0.0.0"}, "127.0.0.1 or ::1"),
    ({"proto": "tls1_3-tls1_2"}, "bad proto"),
    ({"dhparam": "ffdhe1234"}, "dhparam")])
def test_bad_configuration_rejected_before_start(certs: CertSet, tmp_path: Path,
                                                 options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        start_server("gnutls", certs=certs, workdir=tmp_path, **options)
    assert not list(tmp_path.iterdir())  # nothing was launched


def test_server_cache_reuses_identical_config(server_cache: Callable[..., Server]) -> None:
    first = server_cache("openssl", groups=["P-256"], proto="tls1_3")
    assert server_cache("openssl", groups=("P-256",), proto="tls1_3") is first
    other = server_cache("openssl", groups=["P-384"], proto="tls1_3")
    assert other is not first and other.port != first.port
    assert first.alive() and other.alive()


def _inner_conftest(pytester: pytest.Pytester) -> None:
    """Give a pytester session this suite's conftest (and its `servers` import path)."""
    conftest = Path(__file__).resolve().parents[1] / "conftest.py"
    pytester.makeconftest(f"""
        exec(compile(open({str(conftest)!r}).read(), {str(conftest)!r}, "exec"))
    """)


@pytest.mark.needs_impl("openssl")
def test_tls_server_teardown_stops_servers_of_a_failing_test(pytester: pytest.Pytester) -> None:
    _inner_conftest(pytester)
    pytester.makepyfile(test_inner="""
        import os
        from tests.helpers.servers import is_listening
        STARTED = []

        def test_a_fails(tls_server):
            server = tls_server("openssl")
            STARTED.append((server.pid, server.port))
            assert False, "deliberate failure"

        def test_b_server_is_gone():
            (pid, port), = STARTED
            assert not os.path.exists(f"/proc/{pid}") and not is_listening(port)
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1, failed=1)


def test_captures_dir_option_env_and_failure(pytester: pytest.Pytester, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _inner_conftest(pytester)
    pytester.makepyfile(test_inner=f"""
        def test_dir(captures_dir):
            assert str(captures_dir) == {str(tmp_path)!r}
    """)
    monkeypatch.setenv("TLSPROBE_CAPTURES", str(tmp_path))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    monkeypatch.setenv("TLSPROBE_CAPTURES", str(tmp_path / "absent"))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(errors=1)  # in the fixture
    monkeypatch.delenv("TLSPROBE_CAPTURES")
    result = pytester.runpytest("-p", "no:cacheprovider", "-rE", f"--captures-dir={tmp_path}x")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*captures corpus not found at {tmp_path}x*"])


def test_run_cli_runs_the_package(run_cli: Callable[..., Any]) -> None:
    returncode, stdout, stderr = run_cli("--help", timeout=30)
    assert returncode == 0 and "usage: tlsprobe" in stdout
    bad = run_cli("--no-such-option", timeout=30)
    assert bad.returncode != 0 and "tlsprobe" in bad.stderr and bad.stdout == ""
