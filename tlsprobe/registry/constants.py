"""Small TLS registries written out from the RFCs (not in ../shared/iana).

Members use the exact RFC / IANA spelling so `ExtensionType.key_share.name` prints as the
RFC does. Messages keep raw ints; these enums are for naming and for readable code only.
Sources: RFC 8446 (TLS 1.3), RFC 5246 (TLS 1.2), RFC 6066, RFC 7301, RFC 7627, RFC 7685,
RFC 8449, RFC 8879, RFC 9146/9147 (DTLS), RFC 9345, RFC 9000 (QUIC), the IANA "TLS
ExtensionType Values", "TLS Alerts" and "TLS HandshakeType" registries, and the ECH and
ALPS drafts.
"""

from __future__ import annotations

from enum import IntEnum


class ContentType(IntEnum):
    """TLSPlaintext.type (RFC 8446 5.1, RFC 6520, RFC 9146, RFC 9147)."""

    invalid = 0
    change_cipher_spec = 20
    alert = 21
    handshake = 22
    application_data = 23
    heartbeat = 24
    tls12_cid = 25
    ack = 26


class HandshakeType(IntEnum):
    """Handshake.msg_type (RFC 8446 4, RFC 5246 7.4, RFC 6066, RFC 8879, RFC 9147)."""

    hello_request = 0
    client_hello = 1
    server_hello = 2
    hello_verify_request = 3
    new_session_ticket = 4
    end_of_early_data = 5
    hello_retry_request = 6  # TLS 1.3 drafts only; final RFC 8446 reuses server_hello
    encrypted_extensions = 8
    request_connection_id = 9
    new_connection_id = 10
    certificate = 11
    server_key_exchange = 12
    certificate_request = 13
    server_hello_done = 14
    certificate_verify = 15
    client_key_exchange = 16
    client_certificate_request = 17
    finished = 20
    certificate_url = 21
    certificate_status = 22
    supplemental_data = 23
    key_update = 24
    compressed_certificate = 25
    ekt_key = 26
    next_protocol = 67  # NPN (draft-agl-tls-nextprotoneg), never registered
    message_hash = 254


class ExtensionType(IntEnum):
    """Extension.extension_type (RFC 8446 4.2 and the IANA registry, plus common drafts)."""

    server_name = 0
    max_fragment_length = 1
    client_certificate_url = 2
    trusted_ca_keys = 3
    truncated_hmac = 4
    status_request = 5
    user_mapping = 6
    client_authz = 7
    server_authz = 8
    cert_type = 9
    supported_groups = 10
    ec_point_formats = 11
    srp = 12
    signature_algorithms = 13
    use_srtp = 14
    heartbeat = 15
    application_layer_protocol_negotiation = 16
    status_request_v2 = 17
    signed_certificate_timestamp = 18
    client_certificate_type = 19
    server_certificate_type = 20
    padding = 21
    encrypt_then_mac = 22
    extended_master_secret = 23
    token_binding = 24
    cached_info = 25
    tls_lts = 26
    compress_certificate = 27
    record_size_limit = 28
    pwd_protect = 29
    pwd_clear = 30
    password_salt = 31
    ticket_pinning = 32
    tls_cert_with_extern_psk = 33
    delegated_credential = 34
    session_ticket = 35
    TLMSP = 36
    TLMSP_proxying = 37
    TLMSP_delegate = 38
    supported_ekt_ciphers = 39
    pre_shared_key = 41
    early_data = 42
    supported_versions = 43
    cookie = 44
    psk_key_exchange_modes = 45
    certificate_authorities = 47
    oid_filters = 48
    post_handshake_auth = 49
    signature_algorithms_cert = 50
    key_share = 51
    transparency_info = 52
    connection_id_deprecated = 53
    connection_id = 54
    external_id_hash = 55
    external_session_id = 56
    quic_transport_parameters = 57
    ticket_request = 58
    dnssec_chain = 59
    sequence_number_encryption_algorithms = 60
    rrc = 61
    tls_flags = 62
    next_protocol_negotiation = 13172  # NPN, unregistered
    application_settings_old = 17513  # ALPS, old codepoint (Chrome until 2024)
    application_settings = 17613  # ALPS
    channel_id = 30032  # unregistered (Chrome)
    ech_outer_extensions = 0xFD00
    encrypted_client_hello = 0xFE0D
    renegotiation_info = 0xFF01


class AlertLevel(IntEnum):
    """Alert.level (RFC 5246 7.2)."""

    warning = 1
    fatal = 2


class AlertDescription(IntEnum):
    """Alert.description (RFC 8446 6, RFC 5246 7.2, RFC 6066, RFC 7301, RFC 7507, ECH)."""

    close_notify = 0
    unexpected_message = 10
    bad_record_mac = 20
    decryption_failed = 21
    record_overflow = 22
    decompression_failure = 30
    handshake_failure = 40
    no_certificate = 41
    bad_certificate = 42
    unsupported_certificate = 43
    certificate_revoked = 44
    certificate_expired = 45
    certificate_unknown = 46
    illegal_parameter = 47
    unknown_ca = 48
    access_denied = 49
    decode_error = 50
    decrypt_error = 51
    too_many_cids_requested = 52
    export_restriction = 60
    protocol_version = 70
    insufficient_security = 71
    internal_error = 80
    inappropriate_fallback = 86
    user_canceled = 90
    no_renegotiation = 100
    missing_extension = 109
    unsupported_extension = 110
    certificate_unobtainable = 111
    unrecognized_name = 112
    bad_certificate_status_response = 113
    bad_certificate_hash_value = 114
    unknown_psk_identity = 115
    certificate_required = 116
    general_error = 117
    no_application_protocol = 120
    ech_required = 121


class ProtocolVersion(IntEnum):
    """ProtocolVersion values on the wire (record header, legacy_version, supported_versions)."""

    SSL_2_0 = 0x0002
    SSL_3_0 = 0x0300
    TLS_1_0 = 0x0301
    TLS_1_1 = 0x0302
    TLS_1_2 = 0x0303
    TLS_1_3 = 0x0304
    DTLS_1_0 = 0xFEFF
    DTLS_1_2 = 0xFEFD
    DTLS_1_3 = 0xFEFC


class PskKeyExchangeMode(IntEnum):
    """RFC 8446 4.2.9."""

    psk_ke = 0
    psk_dhe_ke = 1


class ECPointFormat(IntEnum):
    """RFC 8422 5.1.2."""

    uncompressed = 0
    ansiX962_compressed_prime = 1
    ansiX962_compressed_char2 = 2


class CertificateCompressionAlgorithm(IntEnum):
    """RFC 8879 3."""

    zlib = 1
    brotli = 2
    zstd = 3


class CompressionMethod(IntEnum):
    """RFC 5246 / RFC 3749."""

    null = 0
    DEFLATE = 1


SSL3, TLS1_0, TLS1_1, TLS1_2, TLS1_3 = 0x0300, 0x0301, 0x0302, 0x0303, 0x0304

_VERSION_NAMES = {
    0x0002: "SSL 2.0", 0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1",
    0x0303: "TLS 1.2", 0x0304: "TLS 1.3", 0xFEFF: "DTLS 1.0", 0xFEFD: "DTLS 1.2",
    0xFEFC: "DTLS 1.3", 0x0100: "DTLS 1.0 (OpenSSL pre-RFC)",
    # Facebook's TLS 1.3 drafts (Fizz, mvfst), as Wireshark names them
    0xFB17: "TLS 1.3 Facebook draft 23", 0xFB1A: "TLS 1.3 Facebook draft 26",
}


def is_tls13_draft(version: int) -> bool:
    """0x7fXX: TLS 1.3 draft XX as sent in supported_versions by pre-RFC implementations."""
    return 0x7F00 <= version <= 0x7FFF


def known_version_name(version: int) -> str | None:
    """Name of a known protocol version id, or None (GREASE is handled by the caller)."""
    if is_tls13_draft(version):
        return f"TLS 1.3 draft {version & 0xFF}"
    return _VERSION_NAMES.get(version)
