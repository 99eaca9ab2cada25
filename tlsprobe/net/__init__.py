"""The only place with sockets: connections with timeouts on every wait.

tcp.py (blocking TCP, target parsing, name resolution), tcp_async.py (asyncio TCP),
transport.py (the transport interface a STARTTLS or QUIC channel implements), driver.py (the
one engine driver, sync and async), not_tls.py (the one not-TLS verdict). Only tcp.py is
imported here, so that parsing a target does not load the engine.
"""

from tlsprobe.net.tcp import Channel, open_channel, parse_target

__all__ = ["Channel", "open_channel", "parse_target"]
