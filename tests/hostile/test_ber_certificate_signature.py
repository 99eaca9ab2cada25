"""A leaf certificate `cryptography` refuses but OpenSSL reads (a serial number whose
length is in BER's long form) still has its key read (wire/spki.py) and the server's
CertificateVerify checked with it: a good signature completes the handshake, a wrong one
is still the server's failure (exit 6), and a leaf that is no certificate by its outline is
still refused as unparsable. tlsprobe refused every such leaf as "not a parsable DER
certificate" (exit 6, a protocol error the server did not commit)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from tests.helpers.bercert import Issued, children, issued, mangled, tlv, write
from tests.helpers.cpu import reaped_cpu

from .catalog import HOLD
from .server import Conn, HostileServer, Script
from .tls import Tls13Server, identity


def _flight(der: bytes, *, bad: bool) -> Script:
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        tls = Tls13Server(ch, conn.hello_raw[-1])
        await conn.send(tls.hello_and_flight(tls.flight(bad_signature=bad, ders=[der])))
        await conn.hold(HOLD)
    return script


@pytest.mark.parametrize("bad", [False, True])
def test_the_signature_is_checked_with_the_key_of_a_ber_leaf(
        run_cli, hostile_server: HostileServer, tmp_path: Path, bad: bool) -> None:
    der = mangled(issued(identity().key), "serial-long-length")   # the server's own key
    listener = hostile_server.serve(_flight(der, bad=bad))
    res = run_cli(f"127.0.0.1:{listener.port}", "--tls1_3", "--no-verify", "--json",
                  "--first-flight-only", "--timeout", "5")
    data = json.loads(res.stdout)
    assert "parsable" not in res.stderr, res.stderr
    if not bad:
        assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
        assert data["signature_verified"] is True, data
        assert data["certificates"][0]["key_type"] == "EC secp256r1", data["certificates"]
        return
    assert res.returncode == 6, res.stderr
    assert data["signature_verified"] is False, data
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "signature" in lines[0], res.stderr


def test_a_leaf_without_a_certificates_outline_is_still_refused(
        run_cli, hostile_server: HostileServer, tmp_path: Path) -> None:
    der = mangled(issued(identity().key), "serial-long-length")
    # one byte short of its own length: no certificate's outline, for OpenSSL neither
    listener = hostile_server.serve(_flight(der[:-1], bad=False))
    res = run_cli(f"127.0.0.1:{listener.port}", "--tls1_3", "--no-verify",
                  "--first-flight-only", "--timeout", "5")
    assert res.returncode == 6, res.stderr
    assert "leaf is not a parsable DER certificate" in res.stderr, res.stderr


#: BER's indefinite lengths (OpenSSL's d2i reads them; `openssl s_server` re-encodes what
#: it sends, so only a scripted server sends one): tlsprobe refused each leaf as "not a
#: parsable DER certificate" (exit 6), where `openssl verify` says OK
INDEFINITE = ("issuer-indefinite-length", "spki-indefinite-length", "tbs-indefinite-length",
              "certificate-indefinite-length")


@pytest.mark.parametrize("edit", INDEFINITE)
def test_a_leaf_of_indefinite_lengths_is_read_as_openssl_reads_it(
        run_cli, hostile_server: HostileServer, tmp_path: Path, edit: str) -> None:
    chain = issued(identity().key)
    der = mangled(chain, edit)
    ca, leaf, _ = write(chain, der, tmp_path)
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(ca), str(leaf)],
                            capture_output=True, text=True, timeout=30, check=False)
    assert verify.returncode == 0 and verify.stdout.endswith(": OK\n"), verify   # OpenSSL first
    listener = hostile_server.serve(_flight(der, bad=False))
    res = run_cli(f"127.0.0.1:{listener.port}", "--tls1_3", "--sni", "localhost", "--cafile",
                  ca, "--json", "--first-flight-only", "--timeout", "5")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    data = json.loads(res.stdout)
    assert data["signature_verified"] is True, data
    assert data["certificates"][0]["key_type"] == "EC secp256r1", data["certificates"]
    verification = data["verification"]   # OpenSSL's verdict (was not established)
    assert verification["code"] == 0 and verification["message"] == "0 (ok)", verification
    assert data["certificates"][0]["subject"] == "CN=localhost", data["certificates"]


def _forged(der: bytes) -> bytes:
    """`der` with the last byte of its CA's signature changed (the certificate's last byte
    before any end-of-contents)."""
    at = len(der) - (5 if der.endswith(b"\x00\x00") else 1)
    return der[:at] + bytes([der[at] ^ 0x01]) + der[at + 1:]


@pytest.mark.parametrize("edit", ["serial-long-length", "certificate-indefinite-length"])
def test_a_ber_leaf_the_ca_did_not_sign_is_7(run_cli, hostile_server: HostileServer,
                                             tmp_path: Path, edit: str) -> None:
    """Read through its copy in DER, the leaf's signature is still checked over the bytes
    as sent: a forged one is OpenSSL's 7, never 0 (nor a verdict not established)."""
    chain = issued(identity().key)
    der = _forged(mangled(chain, edit))
    ca, leaf, _ = write(chain, der, tmp_path)
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(ca), str(leaf)],
                            capture_output=True, text=True, timeout=30, check=False)
    assert verify.returncode != 0 and "error 7 at 0 depth" in verify.stdout + verify.stderr, \
        verify   # OpenSSL first
    listener = hostile_server.serve(_flight(der, bad=False))
    res = run_cli(f"127.0.0.1:{listener.port}", "--tls1_3", "--sni", "localhost", "--cafile",
                  ca, "--json", "--first-flight-only", "--timeout", "5")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    verification = json.loads(res.stdout)["verification"]
    assert verification["code"] == 7, verification


def test_an_indefinite_length_leaf_signature_is_still_checked(
        run_cli, hostile_server: HostileServer) -> None:
    der = mangled(issued(identity().key), "tbs-indefinite-length")
    listener = hostile_server.serve(_flight(der, bad=True))
    res = run_cli(f"127.0.0.1:{listener.port}", "--tls1_3", "--no-verify",
                  "--first-flight-only", "--timeout", "5")
    assert res.returncode == 6 and "signature" in res.stderr, (res.returncode, res.stderr)
    # without its end-of-contents: no certificate's outline, for OpenSSL neither
    cut = mangled(issued(identity().key), "certificate-indefinite-length")[:-2]
    listener = hostile_server.serve(_flight(cut, bad=False))
    res = run_cli(f"127.0.0.1:{listener.port}", "--tls1_3", "--no-verify",
                  "--first-flight-only", "--timeout", "5")
    assert res.returncode == 6, res.stderr
    assert "leaf is not a parsable DER certificate" in res.stderr, res.stderr


def _deep_issuer(der: bytes, depth: int, count: int) -> bytes:
    """`der` with every element down to its issuer's attribute value in indefinite lengths,
    and that value `depth` indefinite SEQUENCEs deep around `count` empty OCTET STRINGs
    (OpenSSL's d2i reads it: 30 nested at most)."""
    tbs, algorithm, signature = children(der)
    fields = children(tbs)
    oid = children(children(children(fields[3])[0])[0])[0]
    value = b"\x04\x00" * count
    for _ in range(depth):
        value = b"\x30\x80" + value + b"\x00\x00"
    fields[3] = b"\x30\x80\x31\x80\x30\x80" + oid + value + b"\x00\x00" * 3
    return b"\x30\x80\x30\x80" + b"".join(fields) + b"\x00\x00" + algorithm + signature + \
        b"\x00\x00"


def _serve_leaf(hostile_server: HostileServer, der: bytes) -> Any:
    """A TLS 1.3 server whose flight carries the leaf `der`, in records of 16 kB."""
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        tls = Tls13Server(ch, conn.hello_raw[-1])
        flight = b"".join(tls.flight(ders=[der]))
        await conn.send(tls.hello_and_flight([]) + tls.encrypt(
            *[flight[i:i + 16384] for i in range(0, len(flight), 16384)]))
        await conn.hold(HOLD)
    return hostile_server.serve(script)


def test_nested_indefinite_lengths_are_read_in_linear_time(
        run_cli, hostile_server: HostileServer) -> None:
    """A 250 kB leaf of 24 nested indefinite lengths around 125,000 elements: each reader
    of the certificate (the guard, its key, its summary, the copy in DER, the trust
    verdict) walked the nest again from each depth, 3 s of CPU for a hostile server's one
    message; it is now read once (wire/ber._ends). Judged by the child's CPU time."""
    der = _deep_issuer(issued(identity().key).leaf_der, 24, 125_000)

    listener = _serve_leaf(hostile_server, der)
    before = reaped_cpu()
    res = run_cli(f"127.0.0.1:{listener.port}", "--tls1_3", "--json", "--first-flight-only",
                  "--timeout", "30", isolated=True, timeout=120)
    used = reaped_cpu() - before
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    data = json.loads(res.stdout)
    assert data["signature_verified"] is True, data
    assert data["verification"]["code"] is None, data["verification"]   # no DER copy: too deep
    assert used < 1.5, used   # (3.2 s before; 0.5 s now, start-up included)


def _many_extensions(chain: Issued, count: int) -> bytes:
    """The leaf with `count` copies of one unknown extension more (cryptography cannot read
    the list: the trust verdict reads it through certtwin.readable_twin), signed again."""
    tbs, algorithm, _ = children(chain.leaf_der)
    fields = children(tbs)
    extensions = children(children(fields[-1])[0])
    extra = tlv(0x30, bytes.fromhex("06032a0304") + tlv(0x04, b"\x05\x00")) * count
    fields[-1] = tlv(0xA3, tlv(0x30, b"".join(extensions) + extra))
    new_tbs = tlv(0x30, b"".join(fields))
    signature = chain.ca_key.sign(new_tbs, ec.ECDSA(hashes.SHA256()))
    return tlv(0x30, new_tbs + algorithm + tlv(0x03, b"\x00" + signature))


def test_a_leaf_of_many_extensions_is_read_in_linear_time(
        run_cli, hostile_server: HostileServer, tmp_path: Path) -> None:
    """A 33 kB leaf of 3,000 copies of an unknown extension (OpenSSL ignores them;
    cryptography refuses the list, so the verdict is not established): the twin that reads
    the extensions as OpenSSL does walked the whole list again for each extension, 30 s of
    CPU (a 220 kB leaf: hours); it is now read once. Judged by the child's CPU time."""
    chain = issued(identity().key)
    der = _many_extensions(chain, 3000)
    ca, _, _ = write(chain, chain.leaf_der, tmp_path)

    listener = _serve_leaf(hostile_server, der)
    before = reaped_cpu()
    res = run_cli(f"127.0.0.1:{listener.port}", "--tls1_3", "--json", "--first-flight-only",
                  "--sni", "localhost", "--cafile", ca, "--timeout", "60", isolated=True,
                  timeout=180)
    used = reaped_cpu() - before
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    verification = json.loads(res.stdout)["verification"]
    assert verification["code"] is None and "Duplicate" in verification["message"], \
        verification   # cryptography cannot read the list: not established
    assert used < 2.0, used   # (30 s before)
