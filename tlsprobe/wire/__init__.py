"""Sans-IO TLS codec: records, handshake reassembly, messages and extensions.

No sockets, files, scapy or rich here: bytes in, frozen dataclasses out, and back to the
same bytes. Every malformed input raises `DecodeError` (with offset and field path);
"need more bytes" is an empty list from the incremental readers.
"""

from __future__ import annotations

from .alert import Alert, ChangeCipherSpec, parse_alerts
from .buffer import Annotation, Buffer, DecodeError, Writer
from .certificate import (
                          Certificate,
                          CertificateEntry,
                          CertificateRequest,
                          CertificateStatus,
                          CertificateVerify,
                          CompressedCertificate,
)
from .context import Message, ParseContext
from .ext_decoders import (
                          CertificateStatusRequest,
                          KeyShareEntry,
                          OcspStatus,
                          OfferedPsks,
                          PskIdentity,
                          ServerName,
                          decode_extension,
                          is_grease,
)
from .extensions import Extension
from .handshake import (
                          Decoded,
                          HandshakeReassembler,
                          UnknownHandshake,
                          decode_handshake,
                          frame,
                          message_class,
)
from .hello import HELLO_RETRY_REQUEST_RANDOM, ClientHello, ServerHello
from .keyexchange import ClientKeyExchange, ExplicitCurve, ServerKeyExchange
from .messages import (
                          EncryptedExtensions,
                          EndOfEarlyData,
                          Finished,
                          HelloRequest,
                          KeyUpdate,
                          MessageHash,
                          NewSessionTicket,
                          ServerHelloDone,
)
from .record import Record, RecordReader, SSLv2ClientHello, looks_like_tls

__all__ = [
                          "HELLO_RETRY_REQUEST_RANDOM",
                          "Alert",
                          "Annotation",
                          "Buffer",
                          "Certificate",
                          "CertificateEntry",
                          "CertificateRequest",
                          "CertificateStatus",
                          "CertificateStatusRequest",
                          "CertificateVerify",
                          "ChangeCipherSpec",
                          "ClientHello",
                          "ClientKeyExchange",
                          "CompressedCertificate",
                          "DecodeError",
                          "Decoded",
                          "EncryptedExtensions",
                          "EndOfEarlyData",
                          "ExplicitCurve",
                          "Extension",
                          "Finished",
                          "HandshakeReassembler",
                          "HelloRequest",
                          "KeyShareEntry",
                          "KeyUpdate",
                          "Message",
                          "MessageHash",
                          "NewSessionTicket",
                          "OcspStatus",
                          "OfferedPsks",
                          "ParseContext",
                          "PskIdentity",
                          "Record",
                          "RecordReader",
                          "SSLv2ClientHello",
                          "ServerHello",
                          "ServerHelloDone",
                          "ServerKeyExchange",
                          "ServerName",
                          "UnknownHandshake",
                          "Writer",
                          "decode_extension",
                          "decode_handshake",
                          "frame",
                          "is_grease",
                          "looks_like_tls",
                          "message_class",
                          "parse_alerts",
]
