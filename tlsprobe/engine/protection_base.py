"""What every record protection shares (engine/protection.py: AEAD, TLS 1.3 and 1.2;
engine/protection_cbc.py: CBC and stream ciphers): the record limits and alerts, the one
`RecordProtectionError`, the record header, and `RecordProtection`, the base that owns the
64-bit sequence number and opens whole records.
"""

from __future__ import annotations

__all__ = ["ALERT_BAD_RECORD_MAC", "ALERT_RECORD_OVERFLOW", "ALERT_UNEXPECTED_MESSAGE",
           "APPLICATION_DATA", "MAX_PLAINTEXT", "MAX_TLS12_CIPHERTEXT", "MAX_TLS13_CIPHERTEXT",
           "SEQ_LIMIT", "TLS1_0", "TLS1_2", "TLS1_3", "RecordProtection",
           "RecordProtectionError", "record_header"]

APPLICATION_DATA = 23
TLS1_0, TLS1_2, TLS1_3 = 0x0301, 0x0303, 0x0304
MAX_PLAINTEXT = 1 << 14
MAX_TLS13_CIPHERTEXT = MAX_PLAINTEXT + 256
MAX_TLS12_CIPHERTEXT = MAX_PLAINTEXT + 2048
SEQ_LIMIT = 1 << 64

# AlertDescription values (RFC 8446 section 6)
ALERT_UNEXPECTED_MESSAGE = 10
ALERT_BAD_RECORD_MAC = 20
ALERT_RECORD_OVERFLOW = 22


class RecordProtectionError(ValueError):
    """A protected record failed to decrypt or authenticate; `alert` is what to send."""

    def __init__(self, reason: str, alert: int = ALERT_BAD_RECORD_MAC) -> None:
        self.reason = reason
        self.alert = alert
        super().__init__(reason)


def record_header(content_type: int, version: int, length: int) -> bytes:
    """The 5-byte header of a record of `length` bytes."""
    if length > 0xFFFF:
        raise ValueError(f"record of {length} bytes does not fit a 16-bit length")
    return bytes([content_type]) + version.to_bytes(2, "big") + length.to_bytes(2, "big")


class RecordProtection:
    """Base of all protections: sequence handling and whole-record decryption."""

    version: int = TLS1_2

    def __init__(self, seq: int = 0) -> None:
        self.seq = seq

    def _next_seq(self) -> int:
        if self.seq >= SEQ_LIMIT - 1:
            raise RecordProtectionError("sequence number exhausted", ALERT_UNEXPECTED_MESSAGE)
        return self.seq

    def encrypt(self, content_type: int, plaintext: bytes) -> bytes:
        """Protect one record; returns the whole record, 5-byte header included."""
        raise NotImplementedError

    def decrypt(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        """Open one record given its header fields; returns (content type, plaintext)."""
        raise NotImplementedError

    def decrypt_record(self, record: bytes) -> tuple[int, bytes]:
        """Open one whole record (5-byte header + fragment)."""
        if len(record) < 5 or int.from_bytes(record[3:5], "big") != len(record) - 5:
            raise RecordProtectionError("record header length does not match the record")
        return self.decrypt(record[0], int.from_bytes(record[1:3], "big"), record[5:])
