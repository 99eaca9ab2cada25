"""SSLv2 (DROWN, CVE-2016-0800): does the server still speak SSL 2.0?

A server that answers SSLv2 lets an attacker use it as a Bleichenbacher oracle against the
RSA key it shares with its TLS service (DROWN), on top of SSLv2's own breaks. The check
sends an SSLv2 CLIENT-HELLO (2-byte record header with the high bit set, msg type 1, version
0x0002, the seven SSLv2 cipher specs, a 16-byte challenge, as OpenSSL's SSLv2 client did)
and reads the answer:
  - an SSLv2 SERVER-HELLO (msg type 4): vulnerable, with the cipher specs it lists as
    evidence; one that lists none speaks SSLv2 but shares no cipher (inconclusive: DROWN
    needs one, CVE-2015-3197 aside);
  - an SSLv2 ERROR (msg type 0): the server does not speak SSLv2 (not vulnerable);
  - a TLS record (alert or anything else), a close or a reset: not vulnerable when the
    server then answers the hello that established its highest TLS version (one more
    connection); a server that refuses that too may refuse every hello by now (a rate
    limiter): inconclusive;
  - nothing by the deadline: inconclusive.
One connection (two for a refusal).
"""

from __future__ import annotations

import os

from tlsprobe.errors import NetworkError
from tlsprobe.model.check_details import Sslv2Details
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

#: SSLv2 cipher specs (draft-hickman-netscape-ssl-00 appendix A)
SSL2_CIPHERS = {
    0x010080: "SSL_CK_RC4_128_WITH_MD5", 0x020080: "SSL_CK_RC4_128_EXPORT40_WITH_MD5",
    0x030080: "SSL_CK_RC2_128_CBC_WITH_MD5", 0x040080: "SSL_CK_RC2_128_CBC_EXPORT40_WITH_MD5",
    0x050080: "SSL_CK_IDEA_128_CBC_WITH_MD5", 0x060040: "SSL_CK_DES_64_CBC_WITH_MD5",
    0x0700C0: "SSL_CK_DES_192_EDE3_CBC_WITH_MD5"}
SERVER_HELLO, ERROR = 4, 0
TLS_RECORDS = {20: "a TLS ChangeCipherSpec record", 21: "a TLS alert", 22: "a TLS handshake "
               "record", 23: "a TLS application data record", 24: "a TLS heartbeat record"}
MAX_ANSWER = 2 + 0x7FFF


def client_hello(challenge: bytes) -> bytes:
    """An SSLv2 CLIENT-HELLO record offering every SSLv2 cipher spec."""
    specs = b"".join(c.to_bytes(3, "big") for c in SSL2_CIPHERS)
    body = bytes([1]) + b"\x00\x02" + len(specs).to_bytes(2, "big") + b"\x00\x00" + \
        len(challenge).to_bytes(2, "big") + specs + challenge
    return bytes([0x80 | (len(body) >> 8), len(body) & 0xFF]) + body


def cipher_specs(hello: bytes) -> list[int] | None:
    """The cipher specs of a SERVER-HELLO message (record header removed), None when the
    lengths do not add up."""
    if len(hello) < 11 or hello[0] != SERVER_HELLO:
        return None
    cert_len = int.from_bytes(hello[5:7], "big")
    specs_len = int.from_bytes(hello[7:9], "big")
    conn_len = int.from_bytes(hello[9:11], "big")
    if specs_len % 3 or 11 + cert_len + specs_len + conn_len > len(hello):
        return None
    p = 11 + cert_len
    return [int.from_bytes(hello[i:i + 3], "big") for i in range(p, p + specs_len, 3)]


async def _talk(transport: AsyncTransport, deadline: float) -> str | bytes:
    """The SSLv2 message the server answered with, or a word for what it did instead."""
    await transport.send(client_hello(os.urandom(16)))
    data = b""
    try:
        while True:
            more = await transport.receive(deadline)
            if not more:
                return "closed" if not data else "a cut SSLv2 record"
            data += more
            if not data[0] & 0x80:
                return TLS_RECORDS.get(data[0], "bytes that are not SSLv2")
            if len(data) >= 2:
                size = ((data[0] & 0x7F) << 8 | data[1]) + 2
                if len(data) >= size:
                    return data[2:size]
            if len(data) > MAX_ANSWER:
                return "bytes that are not SSLv2"
    except NetworkError as exc:
        return "reset" if exc.cause == "reset" else f"no SSLv2 answer: {exc.reason}"


async def run(ctx: CheckContext) -> CheckResult:
    sent = "sent: an SSLv2 CLIENT-HELLO offering the 7 SSLv2 cipher specs"
    got = await ctx.converse(_talk)
    if isinstance(got, Outcome):
        return ctx.inconclusive(f"the connection failed: {got.describe()}", (sent,))
    if isinstance(got, str):
        if got.startswith("no SSLv2 answer") or got in ("bytes that are not SSLv2",
                                                         "a cut SSLv2 record"):
            return ctx.inconclusive(got, (sent, f"received: {got}"))
        said = f"it answered with {'a close' if got == 'closed' else got}"
        unsure = await ctx.still_answered(ctx.spoken[0]) if ctx.spoken else \
            "and no TLS version was established to ask the server whether it still answers"
        if unsure:
            return ctx.inconclusive(f"{said}, {unsure}", (sent, f"received: {got}"))
        return ctx.result(Verdict.not_vulnerable, f"the server does not speak SSLv2: {said}",
                          (sent, f"received: {got}"), details=Sslv2Details(False, ()))
    if got[:1] == bytes([ERROR]):
        code = int.from_bytes(got[1:3], "big") if len(got) >= 3 else None
        return ctx.result(Verdict.not_vulnerable, "the server answered with an SSLv2 ERROR "
                          f"({code}): it shares no SSLv2 cipher",
                          (sent, f"received: SSLv2 ERROR {code}"),
                          details=Sslv2Details(True, ()))
    specs = cipher_specs(got)
    if specs is None:
        return ctx.inconclusive("an SSLv2 answer that is not a well-formed SERVER-HELLO",
                                (sent, f"received: SSLv2 message type {got[0]}"))
    names = [SSL2_CIPHERS.get(s, f"0x{s:06x}") for s in specs]
    evidence = (sent, f"received: SSLv2 SERVER-HELLO listing {', '.join(names) or 'no cipher'}")
    if not specs:
        return ctx.inconclusive("the server speaks SSLv2 but lists no cipher spec", evidence)
    return ctx.result(Verdict.vulnerable, f"the server speaks SSLv2 (DROWN): its SERVER-HELLO "
                      f"lists {', '.join(names)}", evidence, severity=Severity.high,
                      details=Sslv2Details(True, tuple(specs)))


CHECK = ActiveCheck("sslv2", "SSLv2 (DROWN)", run, Sslv2Details)
