"""The `starttls` object of a probe or audit report (issue 13): what the server said before
TLS on a `--starttls` connection, network text escaped (printable ASCII as is, a backslash
doubled, every other byte as \\xNN), so the JSON and the terminal show the same safe text."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StartTlsInfo:
    """`protocol` (smtp, imap, ...), `chosen_by` ("option": named by --starttls; "port":
    --starttls auto chose it by the well-known port), the server's `banner` (greeting,
    stream header, handshake packet summary) and the `capability` line that advertised TLS
    (None when none did, e.g. an FTP server whose FEAT omits AUTH TLS but accepts it)."""

    protocol: str
    chosen_by: str
    banner: str | None = None
    capability: str | None = None


__all__ = ["StartTlsInfo"]
