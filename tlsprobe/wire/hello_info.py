"""The hello summaries from the wire codec's typed messages, and the SSLv2-format records.

`client_hello_info` / `server_hello_info` build the same `ClientHelloInfo` /
`ServerHelloInfo` as the fast readers of wire.hello_summary, from the codec's ClientHello and
ServerHello: the fallback when the fast reader refuses a message (the codec then gives the
precise error) and the oracle the tests compare the fast reader with.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.hello import ClientHello, ServerHello
from tlsprobe.wire.hello_fields import (
    ALPN,
    CLIENT_FIELDS,
    EMS,
    ETM,
    KEY_SHARE,
    KEY_SHARE_DRAFT,
    PRE_SHARED_KEY,
    SESSION_TICKET,
    SUPPORTED_VERSIONS,
    ClientHelloInfo,
    ServerHelloInfo,
)
from tlsprobe.wire.record import SSLv2ClientHello, sslv2_record_size


@dataclass(frozen=True, slots=True)
class SSLv2ServerHelloInfo:
    """An SSL 2.0 SERVER-HELLO: the server speaks only SSL 2.0 (RFC 6176 forbids it)."""

    version: int
    cipher_specs: tuple[int, ...]
    certificate: bytes
    size: int


def parse_sslv2_server_hello(record: bytes) -> SSLv2ServerHelloInfo:
    """One whole SSLv2 record holding a SERVER-HELLO (msg_type 4)."""
    if len(record) < 13 or not record[0] & 0x80 or record[2] != 4:
        raise DecodeError("not an SSLv2 SERVER-HELLO", 0, "SSLv2ServerHello")
    if sslv2_record_size(record) != len(record):
        raise DecodeError("record length does not match", 0, "SSLv2ServerHello")
    version, cert_len, specs_len, cid_len = struct.unpack_from("!HHHH", record, 5)
    if specs_len % 3 or 13 + cert_len + specs_len + cid_len != len(record):
        raise DecodeError("lengths do not add up", 7, "SSLv2ServerHello")
    cert = bytes(record[13:13 + cert_len])
    p = 13 + cert_len
    specs = tuple(int.from_bytes(record[i:i + 3], "big") for i in range(p, p + specs_len, 3))
    return SSLv2ServerHelloInfo(version, specs, cert, len(record))


_T = TypeVar("_T")
_D = TypeVar("_D")


def _safe(get: Callable[[], _T], default: _D, problems: list[str] | None = None,
          name: str = "") -> _T | _D:
    try:
        return get()
    except DecodeError:
        if problems is not None:
            problems.append(name)
        return default


def client_hello_info(hello: ClientHello, size: int = 0) -> ClientHelloInfo:
    """The summary of a ClientHello decoded by the wire codec."""
    problems = []
    fields: dict[str, object] = {}
    for ext_type, (name, _) in CLIENT_FIELDS.items():
        e = hello.extension(ext_type)
        if e is None or name in fields or name in problems:
            continue
        try:
            if name == "sni":
                fields[name] = hello.server_name
            elif name == "key_shares":
                fields[name] = tuple((e.group, len(e.key_exchange)) for e in hello.key_shares)
            elif name == "alpn":
                fields[name] = tuple(hello.alpn_protocols)
            elif name == "session_ticket":
                fields[name] = len(e.data)
            elif name == "psk_identities":
                fields[name] = len(e.decode().identities)
            elif name == "early_data":
                fields[name] = True
            elif name == "ec_point_formats":
                fields[name] = tuple(e.decode())
            else:
                fields[name] = tuple(getattr(hello, name))
        except DecodeError:
            problems.append(name)
    info = ClientHelloInfo(hello.legacy_version, hello.random, hello.legacy_session_id,
                           tuple(hello.cipher_suites), hello.legacy_compression_methods,
                           tuple(e.type for e in hello.extensions), size=size,
                           problems=tuple(problems))
    if not fields:
        return info
    return ClientHelloInfo._make(fields.get(field, value)
                                 for field, value in zip(info._fields, info))


def sslv2_client_hello_info(hello: SSLv2ClientHello) -> ClientHelloInfo:
    """An SSLv2-format ClientHello. Its cipher specs are 3 bytes; those of the form 0x00XXYY
    name the TLS cipher suite 0xXXYY and are the offered suites here (SSLv2-only specs such
    as 0x010080 have no TLS equivalent and are left out)."""
    suites = tuple(s for s in hello.cipher_specs if s < 0x10000)
    return ClientHelloInfo(hello.version, hello.challenge.rjust(32, b"\x00")[-32:],
                           hello.session_id, suites, b"\x00", (), size=len(hello.raw),
                           sslv2=True, sslv2_cipher_specs=tuple(hello.cipher_specs))


def server_hello_info(hello: ServerHello, size: int = 0) -> ServerHelloInfo:
    """The summary of a ServerHello decoded by the wire codec."""
    types = tuple(e.type for e in hello.extensions)
    problems: list[str] = []
    version = _safe(lambda: hello.selected_version, hello.legacy_version, problems,
                    "supported_versions")
    share = _safe(lambda: hello.key_share, None, problems, "key_share")
    hrr_group = _safe(lambda: hello.hrr_selected_group, None, problems, "key_share")
    alpn_ext = hello.extension(ALPN)
    alpn = None
    if alpn_ext is not None:
        names: object = _safe(lambda: alpn_ext.decode(hello.where), [], problems, "alpn")
        if isinstance(names, list) and len(names) == 1:
            alpn = names[0]
        elif "alpn" not in problems:
            problems.append("alpn")
    psk_ext = hello.extension(PRE_SHARED_KEY)
    psk = _safe(lambda: psk_ext.decode(hello.where), None, problems, "pre_shared_key") \
        if psk_ext is not None else None
    order = {t: i for i, t in reversed(list(enumerate(types)))}
    ext_of = {"supported_versions": SUPPORTED_VERSIONS, "key_share": KEY_SHARE,
              "alpn": ALPN, "pre_shared_key": PRE_SHARED_KEY}
    problems.sort(key=lambda n: order.get(ext_of[n], order.get(KEY_SHARE_DRAFT, 0)))
    return ServerHelloInfo(
        hello.legacy_version, hello.random, hello.legacy_session_id_echo, hello.cipher_suite,
        hello.legacy_compression_method, types, version,
        (share[0], len(share[1])) if share is not None else None,
        hrr_group, alpn, psk if isinstance(psk, int) else None,
        EMS in types, ETM in types, SESSION_TICKET in types, size, tuple(problems))
