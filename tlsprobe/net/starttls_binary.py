"""Binary upgrade dialogues: LDAP StartTLS (RFC 4511 4.14), PostgreSQL SSLRequest, MySQL /
MariaDB SSL request packet.

Each validates every length before it slices (a server's packet is untrusted) and names
another protocol as soon as the first bytes cannot be its own. Temporary refusals are `busy`
(retried, net/starttls_connect.py): LDAP busy (51), and unavailable (52) in a notice of
disconnection (the server shutting down, RFC 4511 4.4.1; slapd answers a StartTLS it cannot
serve, a lasting state, with 52 too, so there it is final),
PostgreSQL SQLSTATE class 53 (insufficient resources: too many connections) and 57P01-57P03
(shutting down, starting up) and the postmaster's plain-text "could not fork" answer, MySQL/MariaDB errors 1040 (too many connections), 1041 (out of
resources), 1053 (shutting down), 1135 (no thread) and 1203 (user connection limit).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Generator

from tlsprobe.net.starttls_base import (
    Context,
    Dialogue,
    Exact,
    Line,
    Note,
    PreambleFailure,
    Problem,
    Request,
    Send,
    busy,
    not_speaking,
    quote,
)

MAX_PACKET = 16384
STARTTLS_OID = b"1.3.6.1.4.1.1466.20037"
NOTICE_OF_DISCONNECTION = b"1.3.6.1.4.1.1466.20036"
LDAP_RESULTS = {0: "success", 1: "operationsError", 2: "protocolError", 3: "timeLimitExceeded",
                12: "unavailableCriticalExtension", 13: "confidentialityRequired",
                51: "busy", 52: "unavailable", 53: "unwillingToPerform", 80: "other"}
PG_TEMPORARY = (b"57P01", b"57P02", b"57P03")
MYSQL_TEMPORARY = (1040, 1041, 1053, 1135, 1203)


def _malformed(proto: str, what: str, data: bytes) -> PreambleFailure:
    return PreambleFailure(Problem.MALFORMED, f"{proto}: malformed {what}: {quote(data)}")


def _tlv(data: bytes, pos: int) -> tuple[int, bytes, int]:
    """One BER element (definite length) at `pos`: (tag, value, next position)."""
    if pos + 2 > len(data):
        raise _malformed("ldap", "ExtendedResponse (truncated element)", data)
    tag, first = data[pos], data[pos + 1]
    pos += 2
    if first & 0x80:
        count = first & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise _malformed("ldap", "ExtendedResponse (length)", data)
        first = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    if pos + first > len(data):
        raise _malformed("ldap", "ExtendedResponse (element beyond its message)", data)
    return tag, data[pos:pos + first], pos + first


def ldap_request(message_id: int = 1) -> bytes:
    """LDAPMessage { messageID, extendedReq [APPLICATION 23] { requestName [0] OID } }."""
    name = b"\x80" + bytes([len(STARTTLS_OID)]) + STARTTLS_OID
    body = b"\x02\x01" + bytes([message_id]) + b"\x77" + bytes([len(name)]) + name
    return b"\x30" + bytes([len(body)]) + body


def _ldap_message(first: bool) -> Generator[Request, bytes, bytes]:
    """One whole LDAPMessage (its SEQUENCE header included)."""
    head = yield Exact(2, "the StartTLS response", None, re.compile(rb"\x30") if first else None,
                       1, record=False)
    if head[0] != 0x30:
        raise not_speaking("ldap", head)
    size, extra = head[1], b""
    if size & 0x80:
        count = size & 0x7F
        if count == 0 or count > 4:
            raise not_speaking("ldap", head)
        extra = yield Exact(count, "the StartTLS response", record=False)
        size = int.from_bytes(extra, "big")
    if size > MAX_PACKET:
        raise PreambleFailure(Problem.TOO_LONG, f"ldap: a {size}-byte message (limit "
                              f"{MAX_PACKET})")
    body = yield Exact(size, "the StartTLS response", _ldap_note)
    return head + extra + body


def _ldap_note(body: bytes) -> str:
    return f"LDAP message ({len(body)} bytes)"


def ldap(ctx: Context) -> Dialogue:
    """StartTLS extended operation; resultCode 0 is the go-ahead."""
    yield Send(ldap_request(), "StartTLS ExtendedRequest (1.3.6.1.4.1.1466.20037)")
    message = yield from _ldap_message(True)
    _, body, _ = _tlv(message, 0)
    tag, ident, pos = _tlv(body, 0)
    tag2, op, _ = _tlv(body, pos)
    if tag != 0x02 or tag2 != 0x78:
        raise not_speaking("ldap", message)
    code_tag, code, pos = _tlv(op, 0)
    _, _, pos = _tlv(op, pos)           # matchedDN
    _, diagnostic, pos = _tlv(op, pos)
    if code_tag != 0x0A or not 1 <= len(code) <= 4:
        raise _malformed("ldap", "ExtendedResponse (resultCode)", message)
    names = []
    while pos < len(op):
        tag, value, pos = _tlv(op, pos)
        if tag == 0x8A:
            names.append(value)
    result = int.from_bytes(code, "big")
    text = f"resultCode {result} ({LDAP_RESULTS.get(result, 'other')})" + \
        (f": {quote(diagnostic)}" if diagnostic else "")
    if result == 0:   # LDAP has no greeting: the accepting answer is the one to report
        yield Note(capability=text.encode())
    disconnect = NOTICE_OF_DISCONNECTION in names or int.from_bytes(ident, "big") == 0
    if result == 51 or (result == 52 and disconnect):
        what = "the session (notice of disconnection)" if disconnect else "StartTLS"
        raise PreambleFailure(Problem.BUSY, f"ldap: the server refused {what} temporarily, "
                              f"{text}")
    if disconnect:
        raise PreambleFailure(Problem.REFUSED, f"ldap: notice of disconnection, {text}")
    if result == 2:
        raise PreambleFailure(Problem.NOT_OFFERED, f"ldap: StartTLS not offered, {text}")
    if result != 0:
        raise PreambleFailure(Problem.REFUSED, f"ldap: the server refused StartTLS, {text}")


SSL_REQUEST = struct.pack("!II", 8, 80877103)


def postgres(ctx: Context) -> Dialogue:
    """SSLRequest; 'S' is the go-ahead, 'N' means no TLS, 'E' an error message."""
    yield Send(SSL_REQUEST, "SSLRequest (80877103)")
    answer = yield Exact(1, "the SSLRequest answer", _pg_note, re.compile(rb"[SNE]"), 1)
    if answer == b"S":
        yield Note(capability=b"S (SSLRequest accepted)")
    if answer == b"N":
        raise PreambleFailure(Problem.NOT_OFFERED, "postgres: SSL not offered: the server "
                              "answered 'N' to SSLRequest (ssl = off?)")
    if answer == b"E":
        head = yield Exact(4, "the error message", record=False)
        size = struct.unpack("!I", head)[0]
        if not 4 < size <= MAX_PACKET:
            if re.fullmatch(rb"[ -~]{4}", head):
                # the postmaster's own "E<text>\n" when it cannot fork a backend for the
                # connection (report_fork_failure_to_client): a resource shortage, for now
                rest = yield Line("the error message")
                raise busy("postgres", "the connection", head + rest.rstrip(b"\x00"))
            raise not_speaking("postgres", answer + head)
        body = yield Exact(size - 4, "the error message", lambda b: f"ErrorResponse "
                           f"({len(b) + 5} bytes)")
        fields = {f[:1]: f[1:] for f in body.split(b"\x00") if f}
        state = fields.get(b"C", b"")
        problem = Problem.BUSY if state[:2] == b"53" or state in PG_TEMPORARY else \
            Problem.REFUSED
        raise PreambleFailure(problem, "postgres: the server refused SSLRequest"
                              f"{' temporarily' if problem is Problem.BUSY else ''}: "
                              f"{quote(state)} {quote(fields.get(b'M', body))}")


def _pg_note(answer: bytes) -> str:
    return {b"S": "'S' (SSL accepted)", b"N": "'N' (no SSL)"}.get(answer, quote(answer))


CLIENT_LONG_PASSWORD, CLIENT_PROTOCOL_41, CLIENT_SSL = 0x1, 0x200, 0x800
CLIENT_SECURE_CONNECTION = 0x8000
#: the first packet's header: a length up to MAX_PACKET (little-endian), sequence 0; other
#: first bytes are named from all that arrived (what_is), not from these four alone
_MYSQL_HEADER = re.compile(rb".[\x00-\x40]\x00\x00", re.DOTALL)


def mysql_ssl_request(charset: int) -> bytes:
    """The SSL request packet (sequence 1): capabilities, max packet, charset, 23 zeros."""
    caps = CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_SECURE_CONNECTION
    payload = struct.pack("<IIB", caps, 1 << 24, charset) + bytes(23)
    return struct.pack("<I", len(payload))[:3] + b"\x01" + payload


def mysql(ctx: Context) -> Dialogue:
    """Initial handshake v10; CLIENT_SSL in its capability flags; then the SSL request."""
    head = yield Exact(4, "the initial handshake packet", start=_MYSQL_HEADER, start_len=4,
                       record=False)
    size, seq = int.from_bytes(head[:3], "little"), head[3]
    if seq != 0 or not 0 < size <= MAX_PACKET:
        raise not_speaking("mysql", head)
    payload = yield Exact(size, "the initial handshake packet", _mysql_note)
    if payload[0] == 0xFF and len(payload) >= 3:
        code = int.from_bytes(payload[1:3], "little")
        text = payload[9:] if payload[3:4] == b"#" else payload[3:]
        yield Note(banner=payload)
        if code in MYSQL_TEMPORARY:
            raise busy("mysql", f"the connection (error {code})", text)
        raise PreambleFailure(Problem.REFUSED, f"mysql: the server refused the connection: "
                              f"error {code} {quote(text)}")
    if payload[0] != 0x0A:
        raise not_speaking("mysql", head + payload)
    end = payload.find(b"\x00", 1)
    if end < 0 or len(payload) < end + 1 + 4 + 8 + 1 + 2:
        raise _malformed("mysql", "initial handshake packet", payload)
    version = payload[1:end]
    pos = end + 1 + 4 + 8 + 1
    caps = int.from_bytes(payload[pos:pos + 2], "little")
    charset = payload[pos + 2] if len(payload) > pos + 2 else 0x21
    if len(payload) >= pos + 7:
        caps |= int.from_bytes(payload[pos + 5:pos + 7], "little") << 16
    yield Note(banner=b"server version " + version)
    if not caps & CLIENT_SSL:
        raise PreambleFailure(Problem.NOT_OFFERED, f"mysql: SSL not offered: server "
                              f"{quote(version)} capability flags 0x{caps:08x} lack CLIENT_SSL")
    yield Note(capability=f"capability flags 0x{caps:08x} (CLIENT_SSL)".encode())
    yield Send(mysql_ssl_request(charset), "SSL request packet (CLIENT_SSL)")


def _mysql_note(payload: bytes) -> str:
    if payload[:1] == b"\x0a":
        return f"initial handshake v10 ({len(payload)} bytes)"
    if payload[:1] == b"\xff":
        return f"ERR packet ({len(payload)} bytes)"
    return f"packet ({len(payload)} bytes)"


BINARY_DIALOGUES: dict[str, Callable[[Context], Dialogue]] = {
    "ldap": ldap, "postgres": postgres, "mysql": mysql,
}
