"""Real TLS handshakes in memory, for codec tests.

Python's ssl module (OpenSSL) runs a client and a server over MemoryBIOs; nothing touches a
socket. We keep both raw byte streams (records as sent) and, through the server context's
message callback, every handshake message in clear text, including the TLS 1.3 messages
that travel encrypted (EncryptedExtensions, Certificate, CertificateVerify, Finished,
NewSessionTicket). `ssl.SSLContext._msg_callback` is CPython's hook onto OpenSSL's
SSL_CTX_set_msg_callback (used by CPython's own tests); if it disappears the tests skip.
"""

from __future__ import annotations

import ssl
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.lab_servers.certs import write_dhparam

from tlsprobe.registry import cipher_suite, parse_suite
from tlsprobe.wire import ParseContext

DATA_DIR = Path(__file__).parent / "data"


@dataclass
class Handshake:
    """One in-memory handshake: raw streams and clear-text handshake messages."""

    client_bytes: bytes = b""
    server_bytes: bytes = b""
    #: (sender, whole handshake message with its 4-byte header), in the order seen
    messages: list[tuple[str, bytes]] = field(default_factory=list)
    version: str = ""
    cipher: str = ""

    def of_type(self, msg_type: int, sender: str | None = None) -> list[bytes]:
        return [m for s, m in self.messages
                if m[0] == msg_type and (sender is None or s == sender)]

    def one(self, msg_type: int, sender: str | None = None) -> bytes:
        found = self.of_type(msg_type, sender)
        assert len(found) == 1, f"expected one message of type {msg_type}, got {len(found)}"
        return found[0]


def _pump(client: ssl.SSLObject, server: ssl.SSLObject, bios: list[ssl.MemoryBIO],
          hs: Handshake) -> None:
    c_in, c_out, s_in, s_out = bios
    done = {"c": False, "s": False}
    for _ in range(30):
        for name, obj in (("c", client), ("s", server)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            data = c_out.read() if name == "c" else s_out.read()
            if name == "c":
                hs.client_bytes += data
                s_in.write(data)
            else:
                hs.server_bytes += data
                c_in.write(data)
        if done["c"] and done["s"] and not c_out.pending and not s_out.pending:
            break
    else:
        raise RuntimeError("handshake did not finish")
    # exchange application data so TLS 1.3 tickets (post-handshake) are sent and read
    client.write(b"ping")
    data = c_out.read()
    hs.client_bytes += data
    s_in.write(data)
    assert server.read(4) == b"ping"
    data = s_out.read()
    hs.server_bytes += data
    c_in.write(data)
    server.write(b"pong")
    data = s_out.read()
    hs.server_bytes += data
    c_in.write(data)
    assert client.read(4) == b"pong"
    hs.version, hs.cipher = str(client.version()), str((client.cipher() or ("",))[0])


def run_handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> Handshake:
    if not hasattr(server_ctx, "_msg_callback"):
        pytest.skip("this Python has no ssl message callback")
    hs = Handshake()

    def callback(conn: Any, direction: str, version: Any, content_type: Any, msg_type: Any,
                 data: bytes) -> None:
        if int(content_type) == 22:
            hs.messages.append(("server" if direction == "write" else "client", bytes(data)))

    server_ctx._msg_callback = callback  # type: ignore[attr-defined]
    bios = [ssl.MemoryBIO() for _ in range(4)]
    client = client_ctx.wrap_bio(bios[0], bios[1], server_hostname="localhost")
    server = server_ctx.wrap_bio(bios[2], bios[3], server_side=True)
    _pump(client, server, bios, hs)
    return hs


def make_contexts(certs: Any, kind: str = "rsa", *, version: ssl.TLSVersion | None = None,
                  ciphers: str | None = None, curve: str | None = None,
                  dhparam: Path | None = None, request_client_cert: bool = False,
                  client_max: ssl.TLSVersion | None = None, alpn: bool = False
                  ) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(certs[kind].chain, certs[kind].key)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    for ctx in (server, client):
        if version is not None:
            with warnings.catch_warnings():  # TLS 1.0 is deprecated: that is the point here
                warnings.simplefilter("ignore", DeprecationWarning)
                ctx.minimum_version = ctx.maximum_version = version
        if ciphers:
            ctx.set_ciphers(ciphers)
    if alpn:
        client.set_alpn_protocols(["h2", "http/1.1"])
        server.set_alpn_protocols(["http/1.1"])
    if client_max is not None:
        client.maximum_version = client_max
    if curve:
        server.set_ecdh_curve(curve)
    if dhparam:
        server.load_dh_params(str(dhparam))
    if request_client_cert:
        server.verify_mode = ssl.CERT_OPTIONAL
        server.load_verify_locations(certs.ca)
    return server, client


Runner = Callable[..., Handshake]


@pytest.fixture(scope="session")
def handshake(certs: Any, tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """`handshake(name)` runs (once per session) one of the named configurations."""
    cache: dict[str, Handshake] = {}
    dh = write_dhparam("ffdhe2048", tmp_path_factory.mktemp("dh"))
    legacy = "ECDHE-RSA-AES128-SHA:@SECLEVEL=0"
    configs: dict[str, dict[str, Any]] = {
        "tls13": {"request_client_cert": True, "alpn": True},
        "tls13_hrr": {"curve": "prime256v1"},
        "tls13_ecdsa": {"kind": "ecdsa"},
        "tls12_ecdhe": {"version": ssl.TLSVersion.TLSv1_2,
                        "ciphers": "ECDHE-RSA-AES128-GCM-SHA256", "request_client_cert": True},
        "tls12_ecdhe_p256": {"version": ssl.TLSVersion.TLSv1_2, "curve": "prime256v1",
                             "kind": "ecdsa", "ciphers": "ECDHE-ECDSA-AES128-GCM-SHA256"},
        "tls12_dhe": {"version": ssl.TLSVersion.TLSv1_2, "dhparam": dh,
                      "ciphers": "DHE-RSA-AES128-GCM-SHA256"},
        "tls12_rsa": {"version": ssl.TLSVersion.TLSv1_2, "ciphers": "AES128-GCM-SHA256"},
        "tls12_downgrade": {"client_max": ssl.TLSVersion.TLSv1_2},
        "tls10_ecdhe": {"version": ssl.TLSVersion.TLSv1, "ciphers": legacy},
    }

    def run(name: str) -> Handshake:
        if name not in cache:
            options = dict(configs[name])
            kind = options.pop("kind", "rsa")
            try:
                cache[name] = run_handshake(*make_contexts(certs, kind, **options))
            except ssl.SSLError as exc:
                pytest.skip(f"OpenSSL here cannot run {name}: {exc}")
        return cache[name]
    return run


def ctx_for(hs: Handshake, sender: str = "server") -> ParseContext:
    """The ParseContext the session layer would build: negotiated version, the suite's key
    exchange from the registry (as the caller resolves it)."""
    version = {"TLSv1.3": 0x0304, "TLSv1.2": 0x0303, "TLSv1.1": 0x0302,
               "TLSv1": 0x0301}[hs.version]
    suite = parse_suite(hs.cipher)
    row = cipher_suite(suite)
    return ParseContext(version=version, cipher_suite=suite, key_exchange=row.kx if row else None,
                        is_server_message=sender == "server")
