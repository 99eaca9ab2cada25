"""An aioquic QUIC v1 server on loopback for the --quic tests, run as its own process.

    python quic_server.py CERT KEY [--groups x25519,secp256r1] [--retry] [--reset-token HEX]
                          [--close-code N]

It binds 127.0.0.1 on a free UDP port, prints "READY <port>" and serves until killed.
aioquic's QuicConfiguration cannot restrict key-exchange groups; its tls.Context keeps
them in `_supported_groups`, so the chosen list (in order) is set on every context it
creates. ALPN h3 only. aioquic never sends a HelloRetryRequest. `--reset-token` makes the
stateless_reset_token of every connection's transport parameters that 16-byte value (aioquic
draws it at random), so a test can forge the server's stateless reset. `--close-code N`:
once a handshake completes the server closes that connection with an application
CONNECTION_CLOSE (frame 0x1d) of error code N and reason "bye" (an HTTP/3 server's
H3_NO_ERROR is 0x100). `--path-challenge`: once a handshake completes the server takes the
client's address for not validated, so its next 1-RTT packet (the one with HANDSHAKE_DONE)
opens with a PATH_CHALLENGE (aioquic's own, RFC 9000 8.2); a PATH_RESPONSE that validates
the path again prints "PATH_VALIDATED" on stdout. `--no-transport-parameters`: its
EncryptedExtensions leaves out quic_transport_parameters (RFC 9001 8.2 says a client must
close the connection with missing_extension).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from aioquic import tls
from aioquic.asyncio.server import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted, QuicEvent

GROUPS = {"x25519": tls.Group.X25519, "secp256r1": tls.Group.SECP256R1,
          "secp384r1": tls.Group.SECP384R1, "secp521r1": tls.Group.SECP521R1}


def restrict_groups(groups: list[Any]) -> None:
    """Every tls.Context created from now on supports exactly `groups`, in this order."""
    original = tls.Context.__init__

    def init(self: tls.Context, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._supported_groups = list(groups)

    tls.Context.__init__ = init  # type: ignore[method-assign]


def fix_reset_token(token: bytes) -> None:
    """Every server connection from now on announces `token` as its stateless reset token."""
    from aioquic.quic.connection import QuicConnection
    original = QuicConnection.__init__

    def init(self: QuicConnection, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        for cid in self._host_cids:
            cid.stateless_reset_token = token

    QuicConnection.__init__ = init  # type: ignore[method-assign]


def closing_protocol(code: int) -> type[QuicConnectionProtocol]:
    """A protocol that closes each connection with application error `code` once its
    handshake completes."""
    class Closing(QuicConnectionProtocol):
        def quic_event_received(self, event: QuicEvent) -> None:
            if isinstance(event, HandshakeCompleted):
                self._quic.close(error_code=code, reason_phrase="bye")
                self.transmit()

    return Closing


def challenging_protocol() -> type[QuicConnectionProtocol]:
    """A protocol whose connections challenge the client's path once the handshake
    completes, and print PATH_VALIDATED when a PATH_RESPONSE answers."""
    from aioquic.quic.connection import QuicConnection
    original = QuicConnection._handle_path_response_frame

    def handle(self: QuicConnection, context: Any, frame_type: int, buf: Any) -> None:
        original(self, context, frame_type, buf)
        if self._network_paths[0].is_validated:
            print("PATH_VALIDATED", flush=True)

    QuicConnection._handle_path_response_frame = handle  # type: ignore[method-assign]

    class Challenging(QuicConnectionProtocol):
        def quic_event_received(self, event: QuicEvent) -> None:
            if isinstance(event, HandshakeCompleted):
                path = self._quic._network_paths[0]
                path.is_validated = path.local_challenge_sent = False

    return Challenging


def drop_transport_parameters() -> None:
    """Every tls.Context from now on sends no extensions in its EncryptedExtensions (aioquic
    puts only quic_transport_parameters there)."""
    tls.Context.handshake_extensions = property(  # type: ignore[assignment]
        lambda self: [], lambda self, value: None)


async def main(args: argparse.Namespace) -> None:
    if args.groups:
        restrict_groups([GROUPS[g] for g in args.groups.split(",")])
    if args.no_transport_parameters:
        drop_transport_parameters()
    if args.reset_token:
        fix_reset_token(bytes.fromhex(args.reset_token))
    config = QuicConfiguration(is_client=False, alpn_protocols=args.alpn.split(","))
    config.load_cert_chain(args.cert, args.key)
    extra: dict[str, Any] = {}
    if args.close_code is not None:
        extra["create_protocol"] = closing_protocol(args.close_code)
    if args.path_challenge:
        extra["create_protocol"] = challenging_protocol()
    server = await serve("127.0.0.1", 0, configuration=config, retry=args.retry, **extra)
    port = server._transport.get_extra_info("sockname")[1]  # type: ignore[union-attr]
    print(f"READY {port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("cert")
    parser.add_argument("key")
    parser.add_argument("--groups", default="")
    parser.add_argument("--retry", action="store_true")
    parser.add_argument("--reset-token", default="")
    parser.add_argument("--close-code", type=lambda v: int(v, 0), default=None)
    parser.add_argument("--alpn", default="h3")
    parser.add_argument("--path-challenge", action="store_true")
    parser.add_argument("--no-transport-parameters", action="store_true")
    try:
        asyncio.run(main(parser.parse_args()))
    except KeyboardInterrupt:
        sys.exit(0)
