"""Client-initiated renegotiation: does the server run a new handshake whenever the client
asks, and how many in a row?

Each renegotiation costs the server a full handshake (its private-key operation) for one
cheap ClientHello of the client's, on a connection it already accepted: a denial-of-service
lever (THC-SSL-DOS, 2011), which servers close by refusing client-initiated renegotiation
(OpenSSL 3 and nginx by default). The check completes a TLS 1.0-1.2 handshake (the highest
version the server speaks below TLS 1.3), then sends a new ClientHello encrypted under the
established keys, with renegotiation_info holding the client's verify_data (RFC 5746 3.5;
when the server did not negotiate RFC 5746, a legacy hello without it), and completes the
new handshake the same way: records under the old keys until each side's
ChangeCipherSpec, under the new ones after it (`Tunnel`). It goes on, one renegotiation
after the other on the same connection, up to MAX_RENEGOTIATIONS:
  - a renegotiation completed (the server's Finished verified), or at least answered with
    a ServerHello (the server agreed to it): vulnerable, with how many were accepted in a
    row and what ended the series;
  - the first one refused (warning or fatal alert, close, reset): not vulnerable;
  - the initial handshake failed, or no answer to the first ClientHello: inconclusive.
One connection; the reason says how many renegotiations it asked for. The audit makes it
after every other connection to the target (active.py LAST): a server may stay busy after
refusing (openssl s_server -www sleeps 1 s), which would hold up a connection queued behind
this one on a server that serves one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig
from tlsprobe.engine.interface import Handshake
from tlsprobe.engine.protection import RecordProtection, RecordProtectionError
from tlsprobe.errors import FailureKind, NetworkError
from tlsprobe.model.check_details import RenegotiationsDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.net.driver import adrive
from tlsprobe.net.not_tls import is_not_tls, not_tls_message
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.audit.scheduler import check_limits
from tlsprobe.probes.checks._legacy import RENEGOTIATION_INFO, legacy_top, no_legacy
from tlsprobe.probes.checks._shared import PassThrough
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.record import CONTENT_TYPES, MAX_CIPHERTEXT

#: renegotiations asked for on one connection at most (politeness: each costs the server)
MAX_RENEGOTIATIONS = 10
CHANGE_CIPHER_SPEC, NO_RENEGOTIATION = 20, 100


class Tunnel(PassThrough):
    """An AsyncTransport for a renegotiation's handshake: what the new handshake sends goes
    out under the keys in force (`write`) until its own ChangeCipherSpec, and as it is
    after; the server's records are opened with `read` up to and including its
    ChangeCipherSpec, and passed on as they are after it."""

    def __init__(self, inner: AsyncTransport, write: RecordProtection,
                 read: RecordProtection) -> None:
        super().__init__(inner)
        self.write, self.read = write, read
        self.sent_ccs = self.got_ccs = False
        self._pending = b""

    async def send(self, data: bytes) -> None:
        out = bytearray()
        for ctype, version, fragment in _records(data)[0]:
            if self.sent_ccs:
                out += _record(ctype, version, fragment)
                continue
            out += self.write.encrypt(ctype, fragment)
            self.sent_ccs = ctype == CHANGE_CIPHER_SPEC
        await self.inner.send(bytes(out))

    async def receive(self, deadline: float) -> bytes:
        while True:
            data = await self.inner.receive(deadline)
            if not data:
                return b""          # closed (a cut record under the old keys is dropped)
            if self.got_ccs:
                data, self._pending = self._pending + data, b""
                return data
            records, self._pending = _records(self._pending + data)
            out = bytearray()
            for ctype, version, fragment in records:
                if self.got_ccs:
                    out += _record(ctype, version, fragment)
                    continue
                ctype, plain = self.read.decrypt(ctype, version, fragment)
                out += _record(ctype, version, plain)
                self.got_ccs = ctype == CHANGE_CIPHER_SPEC
            if out:
                return bytes(out)


def _record(ctype: int, version: int, fragment: bytes) -> bytes:
    return bytes([ctype]) + version.to_bytes(2, "big") + len(fragment).to_bytes(2, "big") + \
        fragment


def _records(data: bytes) -> tuple[list[tuple[int, int, bytes]], bytes]:
    """The whole records at the start of `data` and the bytes left over. Bytes that cannot
    start a TLS record (an HTTP reply, a length over the limit) raise DecodeError naming
    them (escaped): the server's answer, for the check to report, never a wait for a
    record that will not come."""
    out, p = [], 0
    while p < len(data):
        _check_header(data[p:p + 40])
        if len(data) - p < 5:
            break
        length = int.from_bytes(data[p + 3:p + 5], "big")
        if len(data) - p - 5 < length:
            break
        out.append((data[p], int.from_bytes(data[p + 1:p + 3], "big"),
                    data[p + 5:p + 5 + length]))
        p += 5 + length
    return out, data[p:]


def _check_header(start: bytes) -> None:
    """Raise DecodeError when `start` (the bytes where a record should begin, its header
    and what follows) cannot begin a TLS record."""
    head = start[:5]
    length = int.from_bytes(head[3:5], "big") if len(head) == 5 else 0
    if head[0] in CONTENT_TYPES and head[1:2] in (b"", b"\x03") and length <= MAX_CIPHERTEXT:
        return
    if is_not_tls(head) is not False and head[0] not in CONTENT_TYPES:
        what = not_tls_message(start).removeprefix("not a TLS server: it sent ")
        raise DecodeError(f"the server sent {what} where a TLS record belongs")
    raise DecodeError("the server's bytes are not TLS records (a record header "
                      f"{head.hex(' ')})")


@dataclass
class Series:
    """What one connection established: renegotiations accepted, and what ended them."""

    accepted: int = 0             # renegotiations completed
    answered: int = 0             # renegotiation hellos answered with a ServerHello
    ended: str = ""
    refused: bool = False         # the server said no (alert or close) to the last one
    initial: str | None = None    # why the first handshake failed, if it did
    secure: bool = False          # RFC 5746 renegotiation_info in the first ServerHello


def _refused_by_warning(hs: Handshake) -> bool:
    return NO_RENEGOTIATION in hs.warning_alerts


def _secure(hs: Handshake) -> bool:
    """RFC 5746 was negotiated: the ServerHello carries renegotiation_info."""
    return hs.messages.server_hello is not None and \
        hs.messages.server_hello.extension(RENEGOTIATION_INFO) is not None


async def _renegotiate(prev: Handshake, hs: Handshake,
                       transport: AsyncTransport, deadline: float) -> None:
    """Run the renegotiation `hs` under `prev`'s keys (complete, refused by a warning, or an
    exception); a secure one's renegotiation_info must end with the server's verify_data."""
    write, read = prev.protections()
    if write is None or read is None:
        raise ValueError("renegotiation without established keys")
    await adrive(hs, Tunnel(transport, write, read), deadline, until=_refused_by_warning)
    if hs.handshake_complete and _secure(prev) and hs.messages.server_hello is not None:
        keys = prev.session_keys()
        server_vd = keys.server_verify_data if keys is not None else b""
        echo = hs.messages.server_hello.extension(RENEGOTIATION_INFO)
        if echo is None or not echo.data.endswith(server_vd):
            raise HandshakeFailure(FailureKind.PROTOCOL, "the server's renegotiation_info "
                                   "does not end with its verify_data (RFC 5746 3.5)")


def _hello_config(prev: Handshake, config: ClientConfig) -> ClientConfig:
    """The renegotiation hello: RFC 5746 when `prev` negotiated it, else a legacy one."""
    if _secure(prev):
        keys = prev.session_keys()
        return replace(config, renegotiating=keys.client_verify_data if keys else b"")
    return replace(config, renegotiation_info=False)


async def _series(config: ClientConfig, transport: AsyncTransport, deadline: float) -> Series:
    out = Series()
    hs = ClientHandshake(config, annotate=False, stop_after_first_flight=False,
                         limits=check_limits())
    try:
        await adrive(hs, transport, deadline)
    except HandshakeFailure as exc:
        out.initial = str(exc)
        return out
    if not hs.handshake_complete:
        out.initial = hs.incomplete_reason or "the handshake did not complete"
        return out
    out.secure = _secure(hs)
    while out.accepted < MAX_RENEGOTIATIONS:
        nxt = ClientHandshake(_hello_config(hs, config), annotate=False,
                              stop_after_first_flight=False, limits=check_limits())
        try:
            await _renegotiate(hs, nxt, transport, deadline)
        except HandshakeFailure as exc:
            out.ended, out.refused = str(exc), nxt.messages.server_hello is None
        except NetworkError as exc:
            out.ended, out.refused = exc.reason, exc.cause == "reset" and \
                nxt.messages.server_hello is None
        except RecordProtectionError as exc:
            out.ended = f"a record the keys in force do not open: {exc}"
        except DecodeError as exc:
            out.ended = exc.reason
        else:
            if _refused_by_warning(nxt):
                out.ended, out.refused = "server sent warning alert no_renegotiation (100)", \
                    True
            elif not nxt.handshake_complete:
                out.ended = nxt.incomplete_reason or "the renegotiation did not complete"
        if nxt.messages.server_hello is not None:
            out.answered += 1
        if out.ended:
            return out
        out.accepted += 1
        hs = nxt
    out.ended = f"tlsprobe stopped after {MAX_RENEGOTIATIONS}"
    return out


async def run(ctx: CheckContext) -> CheckResult:
    version = legacy_top(ctx)
    if version is None:
        return no_legacy(ctx, "TLS 1.3 has no renegotiation")
    name = registry.version_name(version)
    config = ctx.config((version,))

    async def talk(transport: AsyncTransport, deadline: float) -> Series:
        return await _series(config, transport, deadline)

    got = await ctx.converse(talk)
    if isinstance(got, Outcome):
        return ctx.inconclusive(f"the {name} connection failed: {got.describe()}")
    if got.initial is not None:
        return ctx.inconclusive(f"the initial {name} handshake failed: {got.initial}")
    kind = "secure (RFC 5746)" if got.secure else "legacy (no RFC 5746)"
    evidence = ((f"sent: a complete {name} handshake, then up to {MAX_RENEGOTIATIONS} "
                 f"{kind} renegotiation ClientHellos on the same connection"),
                (f"received: {got.accepted} renegotiations completed ({got.answered} "
                 f"ServerHellos); then {got.ended}"))
    details = RenegotiationsDetails(MAX_RENEGOTIATIONS, got.accepted, got.answered,
                                    got.secure, got.refused)
    if got.answered:
        done = f"accepted {got.accepted} client-initiated renegotiation(s) in a row" \
            if got.accepted else "answered a client-initiated renegotiation with a ServerHello"
        return ctx.result(Verdict.vulnerable, f"the server {done} on one {name} connection "
                          f"(asked for {MAX_RENEGOTIATIONS} at most); then {got.ended}",
                          evidence, severity=Severity.medium, details=details)
    if got.refused:
        return ctx.result(Verdict.not_vulnerable, "the server refused a client-initiated "
                          f"renegotiation: {got.ended}", evidence, details=details)
    return ctx.inconclusive(f"no answer to a renegotiation ClientHello: {got.ended}",
                            evidence, details)


CHECK = ActiveCheck("client_renegotiation", "client-initiated renegotiation (DoS)", run,
                    RenegotiationsDetails)
