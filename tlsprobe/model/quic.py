"""The `quic` object of a probe report (`tlsprobe HOST --quic --json`, issue 15): what the
QUIC side of the connection showed besides the TLS handshake. Network text (the server's
CONNECTION_CLOSE reason) is escaped: printable ASCII as is, every other byte as \\xNN."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QuicParameter:
    """One of the server's transport parameters (RFC 9000 18.2): its id and name, and its
    value as an integer or, for connection IDs, tokens and unknown ones, as hex."""

    id: int
    name: str
    value: int | str


@dataclass(frozen=True)
class QuicSummary:
    """`version`: the QUIC version of the connection ("0x00000001"), `version_name` "v1" or
    "v2"; `compatible_from`: the version we started in when the server moved the connection
    (RFC 9368), else None; `retry_source_connection_id` (hex) when a Retry was followed;
    `version_negotiation`: the versions of a Version Negotiation packet that ended the
    probe; `transport_parameters`: the server's, None when none were read; `closed_by_*`:
    the error codes of the CONNECTION_CLOSE frames (0x100 + alert for a TLS alert);
    `closed_by_server_application`: the server's was the application kind (frame 0x1d),
    whose code is the application's (HTTP/3's H3_NO_ERROR is 0x100), neither a transport
    error nor a TLS alert; None when the server sent none. `handshake_done`: the server's
    HANDSHAKE_DONE arrived; None when it was not due (our Finished was never sent)."""

    version: str
    version_name: str
    compatible_from: str | None
    client_hello_packets: int
    retry_source_connection_id: str | None
    bad_retries: int
    version_negotiation: tuple[str, ...] | None
    transport_parameters: tuple[QuicParameter, ...] | None
    handshake_done: bool | None
    datagrams_received: int
    ignored: int
    closed_by_server: int | None
    closed_by_server_reason: str | None
    closed_by_server_application: bool | None
    closed_by_us: int | None


__all__ = ["QuicParameter", "QuicSummary"]
