"""tlsprobe: show exactly how a TLS server negotiates its key exchange."""

__version__ = "0.1.0"
