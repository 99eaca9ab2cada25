"""The QUIC form of a ClientHello: the one rule the probe (`tlsprobe HOST --quic`,
probes/quic.py) and the audit (`scan --quic`, net/quic_async.py `adapt`) both apply.

Over QUIC (RFC 9001) a hello offers TLS 1.3 only (4.2), with the cipher suites whose QUIC
packet protection tlsprobe implements (wire/quic.py `SUITES`: TLS_AES_128_GCM_SHA256,
TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256; 5.3 forbids TLS_AES_128_CCM_8_SHA256
and tlsprobe has no AES-CCM header protection), ALPN (8.1: h3 unless the caller names the
protocols), our quic_transport_parameters (8.2), and no session_ticket extension or legacy
session id (8.4; the engine leaves the id empty when transport parameters are set). A hello
without TLS 1.3 or without one of those suites cannot be sent: `NotApplicable` says why.
"""

from __future__ import annotations

from dataclasses import replace

from tlsprobe.engine.config import TLS13, ClientConfig
from tlsprobe.net.quic_params import client_parameters
from tlsprobe.net.transport import NotApplicable
from tlsprobe.wire.quic import SUITES

#: the TLS 1.3 cipher suites a QUIC hello offers (in this order of preference when a hello
#: names none of its own order)
QUIC_SUITES = tuple(SUITES)
NO_TLS13 = "not applicable over QUIC: QUIC carries TLS 1.3 only (RFC 9001 4.2)"
NO_SUITE = ("not applicable over QUIC: tlsprobe offers only TLS_AES_128_GCM_SHA256, "
            "TLS_AES_256_GCM_SHA384 and TLS_CHACHA20_POLY1305_SHA256 over QUIC (RFC 9001 5.3)")


def quic_hello(config: ClientConfig, scid: bytes, version: int,
               offered: tuple[int, ...] = (), *,
               alpn: tuple[str, ...] | None = None) -> ClientConfig | NotApplicable:
    """`config` in its QUIC form for a connection whose Source Connection ID is `scid`,
    whose Initial packets are of `version` and that offers `offered` versions for
    compatible version negotiation (RFC 9368). ALPN: `alpn` when the caller names the
    protocols (possibly none), else h3. The suites keep the hello's order."""
    if TLS13 not in config.versions:
        return NotApplicable(NO_TLS13)
    suites = tuple(s for s in config.cipher_suites_13 if s in QUIC_SUITES)
    if not suites:
        return NotApplicable(NO_SUITE)
    return replace(config, versions=(TLS13,), cipher_suites_13=suites,
                   alpn=alpn if alpn is not None else ("h3",),
                   quic_transport_parameters=client_parameters(scid, version, offered),
                   session_ticket=False)


__all__ = ["NO_SUITE", "NO_TLS13", "QUIC_SUITES", "quic_hello"]
