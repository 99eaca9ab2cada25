"""The only place with sockets: connections with timeouts on every wait."""

from tlsprobe.net.tcp import Channel, parse_target, open_channel

__all__ = ["Channel", "parse_target", "open_channel"]
