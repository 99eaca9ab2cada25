"""Certificate-related handshake messages: Certificate, CertificateRequest,
CertificateVerify, CertificateStatus and CompressedCertificate.

Certificate and CertificateRequest have a TLS 1.3 form (RFC 8446 4.3.2, 4.4.2: request
context, per-entry extensions) and a TLS 1.0-1.2 form (RFC 5246 7.4.2, 7.4.4); the
context's version selects it. CertificateVerify carries a SignatureScheme except in
TLS 1.0/1.1. Certificates stay DER bytes: X.509 parsing belongs to `cryptography`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ._util import (
    bytes_label,
    enum_label,
    note_length,
    pull_list,
    pull_opaque,
    pull_uint_noted,
    sigscheme_label,
)
from .buffer import Buffer, Writer
from .context import Message, ParseContext
from .ext_decoders import (
    CERT_COMPRESSION,
    STATUS_TYPES,
    WHERE_CERTIFICATE,
    WHERE_CERTIFICATE_REQUEST,
)
from .extensions import Extension, pull_extensions, push_extensions

#: ClientCertificateType (RFC 5246 7.4.4, RFC 8422 5.5; IANA "TLS ClientCertificateType
#: Identifiers"): a TLS 1.0-1.2 CertificateRequest's certificate_types
CERTIFICATE_TYPES = {1: "rsa_sign", 2: "dss_sign", 3: "rsa_fixed_dh", 4: "dss_fixed_dh",
                     5: "rsa_ephemeral_dh_RESERVED", 6: "dss_ephemeral_dh_RESERVED",
                     20: "fortezza_dms_RESERVED", 64: "ecdsa_sign", 65: "rsa_fixed_ecdh",
                     66: "ecdsa_fixed_ecdh", 67: "gost_sign256", 68: "gost_sign512"}


def certificate_type_name(code: int) -> str:
    """The IANA name of a ClientCertificateType, its hex when unassigned."""
    return CERTIFICATE_TYPES.get(code) or f"0x{code:02x}"


def _legacy_signed(buf: Buffer, ctx: ParseContext) -> bool:
    """True when a signature here has no SignatureScheme prefix (TLS 1.0/1.1); with an
    unknown version, when the rest is exactly one uint16-prefixed vector."""
    if ctx.version is not None:
        return ctx.version < 0x0303
    head = buf.peek(2)
    return len(head) == 2 and int.from_bytes(head, "big") == buf.remaining - 2


@dataclass(frozen=True)
class CertificateEntry:
    """One certificate (DER, or a raw public key) and, in TLS 1.3, its extensions."""

    cert_data: bytes
    extensions: list[Extension] = field(default_factory=list)


@dataclass(frozen=True)
class Certificate(Message):
    """`certificate_request_context` is None for the TLS 1.0-1.2 form."""

    msg_type: ClassVar[int] = 11

    certificate_request_context: bytes | None
    certificate_list: list[CertificateEntry]

    @property
    def tls13(self) -> bool:
        return self.certificate_request_context is not None

    @property
    def certificates(self) -> list[bytes]:
        """The DER certificates, leaf first."""
        return [entry.cert_data for entry in self.certificate_list]

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> Certificate:
        context = pull_opaque(buf, 1, "certificate_request_context") if ctx.tls13 else None
        entries: list[CertificateEntry] = []
        start = buf.tell()
        with buf.field("certificate_list"), buf.block(3) as n:
            note_length(buf, "certificate_list", start, 3, n)
            while not buf.eof():
                name = f"certificate_list[{len(entries)}]"
                cert = pull_opaque(buf, 3, f"{name}.cert_data", minimum=1)
                exts = pull_extensions(buf, WHERE_CERTIFICATE, label=f"{name}.extensions") \
                    if ctx.tls13 else []
                entries.append(CertificateEntry(cert, exts))
        return cls(context, entries)

    def push(self, w: Writer) -> None:
        if self.certificate_request_context is not None:
            w.push_vector(1, self.certificate_request_context)
        with w.block(3):
            for entry in self.certificate_list:
                w.push_vector(3, entry.cert_data)
                if self.certificate_request_context is not None:
                    push_extensions(w, entry.extensions)


@dataclass(frozen=True)
class CertificateRequest(Message):
    """TLS 1.3 form when `certificate_request_context` is not None (context +
    extensions); otherwise the TLS 1.0-1.2 form, where `supported_signature_algorithms`
    is None before TLS 1.2."""

    msg_type: ClassVar[int] = 13

    certificate_request_context: bytes | None = None
    extensions: list[Extension] = field(default_factory=list)
    certificate_types: bytes = b""
    supported_signature_algorithms: list[int] | None = None
    certificate_authorities: list[bytes] = field(default_factory=list)

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> CertificateRequest:
        if ctx.tls13:
            context = pull_opaque(buf, 1, "certificate_request_context")
            return cls(context, pull_extensions(buf, WHERE_CERTIFICATE_REQUEST, minimum=2))
        types = pull_list(buf, 1, 1, "certificate_types",
                          lambda v: enum_label(CERTIFICATE_TYPES, v), minimum=1)
        algorithms = None if _legacy_signed(buf, ctx) else pull_list(
            buf, 2, 2, "supported_signature_algorithms", sigscheme_label, minimum=2)
        authorities: list[bytes] = []
        start = buf.tell()
        with buf.field("certificate_authorities"), buf.block(2) as n:
            note_length(buf, "certificate_authorities", start, 2, n)
            while not buf.eof():
                authorities.append(pull_opaque(
                    buf, 2, f"certificate_authorities[{len(authorities)}]", minimum=1))
        return cls(None, [], bytes(types), algorithms, authorities)

    def push(self, w: Writer) -> None:
        if self.certificate_request_context is not None:
            w.push_vector(1, self.certificate_request_context)
            push_extensions(w, self.extensions)
            return
        w.push_vector(1, self.certificate_types)
        if self.supported_signature_algorithms is not None:
            with w.block(2):
                for scheme in self.supported_signature_algorithms:
                    w.push_uint16(scheme)
        with w.block(2):
            for name in self.certificate_authorities:
                w.push_vector(2, name)


@dataclass(frozen=True)
class CertificateVerify(Message):
    """`algorithm` (SignatureScheme) is None for TLS 1.0/1.1 signatures."""

    msg_type: ClassVar[int] = 15

    algorithm: int | None
    signature: bytes

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> CertificateVerify:
        algorithm = None if _legacy_signed(buf, ctx) else pull_uint_noted(
            buf, 2, "algorithm", sigscheme_label)
        return cls(algorithm, pull_opaque(buf, 2, "signature"))

    def push(self, w: Writer) -> None:
        if self.algorithm is not None:
            w.push_uint16(self.algorithm)
        w.push_vector(2, self.signature)


@dataclass(frozen=True)
class CertificateStatus(Message):
    """RFC 6066 8 / RFC 6961: status_type 1 (ocsp) carries one DER OCSPResponse; for
    ocsp_multi (2) `response` is the encoded OCSPResponse list."""

    msg_type: ClassVar[int] = 22

    status_type: int
    response: bytes

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> CertificateStatus:
        status_type = pull_uint_noted(buf, 1, "status_type",
                                      lambda v: enum_label(STATUS_TYPES, v))
        return cls(status_type, pull_opaque(buf, 3, "response", minimum=1))

    def push(self, w: Writer) -> None:
        w.push_uint8(self.status_type)
        w.push_vector(3, self.response)


@dataclass(frozen=True)
class CompressedCertificate(Message):
    """RFC 8879: a Certificate message compressed with `algorithm`."""

    msg_type: ClassVar[int] = 25

    algorithm: int
    uncompressed_length: int
    compressed_certificate_message: bytes

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> CompressedCertificate:
        algorithm = pull_uint_noted(buf, 2, "algorithm",
                                    lambda v: enum_label(CERT_COMPRESSION, v))
        length = pull_uint_noted(buf, 3, "uncompressed_length", bytes_label)
        return cls(algorithm, length,
                   pull_opaque(buf, 3, "compressed_certificate_message", minimum=1))

    def push(self, w: Writer) -> None:
        w.push_uint16(self.algorithm)
        w.push_uint24(self.uncompressed_length)
        w.push_vector(3, self.compressed_certificate_message)


MESSAGE_CLASSES: list[type[Message]] = [Certificate, CertificateRequest, CertificateVerify,
                                        CertificateStatus, CompressedCertificate]
