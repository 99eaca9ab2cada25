"""How a handshake is described, shared by the live probe's summary and the pcap report.

One implementation of each describing rule, so that a probe and a capture of the same
handshake say the same words: the offer (`offer`), the key exchange with `openssl
s_client`'s "Server Temp Key" wording (`named_group_key_exchange`, `dhe_key_exchange`,
`explicit_curve_key_exchange`), the certificate summary (`certificate_info`), handshake
message names and labels (`message_name`, `message_label`) and SSL 2.0 cipher specs
(`sslv2_cipher`). Pure functions of values: the callers memoise them as they need
(offline.build per capture analysis).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from tlsprobe import registry
from tlsprobe.model.facts import CLIENT, AlertFact, HelloFacts, KeyExchangeFacts
from tlsprobe.model.probe import (
    ENCRYPTED_ALERT,
    AlertInfo,
    CertificateInfo,
    Cipher,
    Codepoint,
    KeyExchange,
    Offer,
)

if TYPE_CHECKING:
    import datetime

    from cryptography.x509 import Certificate, Name

# Bits as `openssl s_client` prints them in "Server Temp Key".
TEMP_KEY = {0x001D: ("X25519", 253), 0x001E: ("X448", 448), 0x0017: ("ECDH, prime256v1", 256),
            0x0018: ("ECDH, secp384r1", 384), 0x0019: ("ECDH, secp521r1", 521),
            0x0016: ("ECDH, secp256k1", 256), 0x0015: ("ECDH, secp224r1", 224),
            0x0013: ("ECDH, prime192v1", 192), 0x001A: ("ECDH, brainpoolP256r1", 256),
            0x001B: ("ECDH, brainpoolP384r1", 384), 0x001C: ("ECDH, brainpoolP512r1", 512),
            0x001F: ("ECDH, brainpoolP256r1", 256), 0x0020: ("ECDH, brainpoolP384r1", 384),
            0x0021: ("ECDH, brainpoolP512r1", 512), 0x0100: ("DH", 2048), 0x0101: ("DH", 3072),
            0x0102: ("DH", 4096), 0x0103: ("DH", 6144), 0x0104: ("DH", 8192)}
# The other curves of RFC 4492 (binary and Koblitz; some TLS 1.2 servers still answer them),
# named as the registry names them: OpenSSL prints the bits of the group's order, as
# `openssl ecparam -text` does (sect571r1: 570).
TEMP_KEY.update({code: (f"ECDH, {registry.group_name(code)}", bits) for code, bits in (
    (0x0001, 163), (0x0002, 162), (0x0003, 163), (0x0004, 193), (0x0005, 193),
    (0x0006, 232), (0x0007, 233), (0x0008, 238), (0x0009, 281), (0x000A, 282),
    (0x000B, 407), (0x000C, 409), (0x000D, 570), (0x000E, 570), (0x000F, 161),
    (0x0010, 161), (0x0011, 161), (0x0012, 192), (0x0014, 225))})

#: the key exchange kind of a TLS 1.3 key_share group by its registry kind (else ECDHE)
_GROUP_KIND = {"hybrid": "hybrid", "mlkem": "KEM", "ffdhe": "DHE"}

#: SSL 2.0 cipher specs (draft-hickman-netscape-ssl-00 CIPHER-KIND) with Wireshark's names
#: and OpenSSL's
SSLV2_CIPHER_SPECS: dict[int, tuple[str, str]] = {
    0x010080: ("SSL2_RC4_128_WITH_MD5", "RC4-MD5"),
    0x020080: ("SSL2_RC4_128_EXPORT40_WITH_MD5", "EXP-RC4-MD5"),
    0x030080: ("SSL2_RC2_128_CBC_WITH_MD5", "RC2-CBC-MD5"),
    0x040080: ("SSL2_RC2_128_CBC_EXPORT40_WITH_MD5", "EXP-RC2-CBC-MD5"),
    0x050080: ("SSL2_IDEA_128_CBC_WITH_MD5", "IDEA-CBC-MD5"),
    0x060040: ("SSL2_DES_64_CBC_WITH_MD5", "DES-CBC-MD5"),
    0x0700C0: ("SSL2_DES_192_EDE3_CBC_WITH_MD5", "DES-CBC3-MD5"),
    0x080080: ("SSL2_RC4_64_WITH_MD5", "RC4-64-MD5"),
}


# -- messages ---------------------------------------------------------------------------
def message_name(msg_type: int) -> str:
    """OpenSSL's spelling: client_hello -> ClientHello; unknown types stay hex."""
    name = registry.handshake_name(msg_type)
    if name.startswith("0x"):
        return f"UnknownHandshake({name})"
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def message_label(direction: int, msg_type: int, hrr: bool = False,
                  decrypted: bool = False) -> str:
    """A handshake message in a report's message list: ">>> ClientHello" (direction 0, the
    client) or "<<< ServerHello", "(decrypted)" when only a key log revealed it."""
    name = "HelloRetryRequest" if hrr else message_name(msg_type)
    return f"{'<<<' if direction else '>>>'} {name}{' (decrypted)' if decrypted else ''}"


# -- the offer --------------------------------------------------------------------------
def offer(versions: tuple[int, ...], suites: tuple[int, ...], groups: tuple[int, ...],
          shares: tuple[int, ...], sigalgs: tuple[int, ...], alpn: tuple[str, ...],
          sni: str | None, size: int) -> Offer:
    """What a ClientHello offered, from its raw values in wire order (GREASE kept);
    `size`: the whole message's bytes, header included."""
    return Offer(versions=tuple(Codepoint.version(v) for v in versions),
                 cipher_suites=tuple(Cipher.of(s) for s in suites),
                 groups=tuple(Codepoint.group(g) for g in groups),
                 key_share_groups=tuple(Codepoint.group(g) for g in shares),
                 signature_algorithms=tuple(Codepoint.sigscheme(s) for s in sigalgs),
                 alpn=alpn, sni=sni, client_hello_bytes=size)


def hello_offer(hello: HelloFacts) -> Offer:
    """`offer` of a ClientHello's facts."""
    return offer(hello.versions, hello.cipher_suites, hello.groups,
                 tuple(group for group, _ in hello.key_shares), hello.signature_algorithms,
                 hello.alpn, hello.sni, hello.size)


# -- alerts -----------------------------------------------------------------------------
def alert_info(alert: AlertFact, live: bool) -> AlertInfo:
    """An alert in a report: its direction as the live probe says it ("sent", "received")
    or as a capture does ("client", "server"); one seen encrypted, without its key, is
    named ENCRYPTED_ALERT."""
    client = alert.sender == CLIENT
    side = ("sent" if client else "received") if live else ("client" if client else "server")
    if alert.level is None or alert.description is None:
        return AlertInfo(side, None, None, ENCRYPTED_ALERT)
    return AlertInfo(side, alert.level, alert.description,
                     registry.alert_name(alert.description))


def hello_retry_text(group: Codepoint | None, kx: KeyExchange | None) -> str:
    """The summary's HelloRetryRequest row: the group it asked for; when it asked for none
    (the engine accepts that only with a cookie, RFC 8446 4.1.4) the key exchange's source
    still says that one came; else "no"."""
    if group is not None:
        return group.label()
    if kx is not None and kx.source == "hello_retry_request":
        return "yes, asking for no group (cookie only)"
    return "no"


def alpn_text(version: Codepoint | None, alpn: str | None, messages: tuple[str, ...]) -> str:
    """The summary's ALPN row: the protocol chosen, "(none)", or, in TLS 1.3, where the
    server's EncryptedExtensions (not its ServerHello) names it, "not known" while that
    message is not in the report's message list (`message_label`'s words): a handshake that
    ended before it established no absence."""
    if alpn:
        return alpn
    if version is not None and version.id >= 0x0304 and not any(
            m.startswith("<<< EncryptedExtensions") for m in messages):
        return "(not known: no EncryptedExtensions from the server, which names it in " \
            "TLS 1.3)"
    return "(none)"


# -- the key exchange -------------------------------------------------------------------
def key_exchange(kx: KeyExchangeFacts | None) -> KeyExchange | None:
    """The one description of a key exchange's facts, for the probe and the capture
    report: kind, where the group was chosen, share sizes and "Server Temp Key"."""
    if kx is None:
        return None
    source, kind, group = kx.source, kx.kind, kx.group
    if source in ("key_share", "hello_retry_request"):
        if group is None:
            return KeyExchange(kind="unknown", source=source)
        return named_group_key_exchange(key_share_kind(group), source, group,
                                        kx.server_share_bytes, kx.client_share_bytes,
                                        valid=kx.valid, problem=kx.problem)
    if source == "malformed":
        return KeyExchange(kind="unknown", source=source)
    if source != "server_key_exchange":   # rsa, none, not_captured
        return KeyExchange(kind=kind or "unknown", source=source,
                           client_share_bytes=kx.client_share_bytes)
    if kind == "ECJPAKE" and group is not None:
        # the curve only: its key pairs and proofs are no key share
        return KeyExchange(kind=kind, source=source, group=Codepoint.group(group))
    if group is not None:
        return named_group_key_exchange("ECDHE", source, group, kx.server_share_bytes,
                                        kx.client_share_bytes, valid=kx.valid,
                                        problem=kx.problem)
    if kx.dh_prime is not None:
        return dhe_key_exchange(kx.dh_prime, kx.dh_group_name, kx.server_share_bytes,
                                kx.client_share_bytes, valid=kx.valid, problem=kx.problem)
    if kx.explicit_curve:
        return explicit_curve_key_exchange(kx.client_share_bytes)
    return KeyExchange(kind=kind or "unknown", source=source,
                       client_share_bytes=kx.client_share_bytes)


def key_share_kind(group: int) -> str:
    """The kind of a TLS 1.3 key_share exchange in this group (hybrid, KEM, DHE, ECDHE)."""
    info = registry.group(group)
    return _GROUP_KIND.get(info.kind if info else "", "ECDHE")


def named_group_key_exchange(kind: str, source: str, group: int, server_len: int | None,
                             client_len: int | None, *, valid: bool | None = None,
                             problem: str | None = None) -> KeyExchange:
    """A key exchange in a named group, with s_client's "Server Temp Key" wording (bits
    as OpenSSL prints them; an unknown group by name and server share size)."""
    cp = Codepoint.group(group)
    known = TEMP_KEY.get(group)
    bits, temp = (known[1], f"{known[0]}, {known[1]} bits") if known else \
        (None, f"{cp.name}, {server_len}-byte server share")
    return KeyExchange(kind=kind, source=source, group=cp, server_share_bytes=server_len,
                       client_share_bytes=client_len, valid=valid, problem=problem,
                       bits=bits, server_temp_key=temp)


def dhe_key_exchange(prime: int, name: str | None, server_len: int | None,
                     client_len: int | None, *, valid: bool | None = None,
                     problem: str | None = None) -> KeyExchange:
    """A finite-field DHE exchange from the ServerKeyExchange's prime; `name`: the known
    group the prime is (ffdhe2048, a MODP group...) or None."""
    bits = prime.bit_length()
    code = registry.parse_group(name) if name and name.startswith("ffdhe") else None
    return KeyExchange(kind="DHE", source="dhe_parameters",
                       group=Codepoint.group(code) if code is not None else None,
                       server_share_bytes=server_len, client_share_bytes=client_len,
                       dh_prime_bits=bits, dh_group_name=name or f"unknown {bits}-bit",
                       bits=bits, server_temp_key=f"DH, {bits} bits", valid=valid,
                       problem=problem)


def explicit_curve_key_exchange(client_len: int | None = None) -> KeyExchange:
    """ECDHE over explicit curve parameters: no named group to name."""
    return KeyExchange(kind="ECDHE", source="server_key_exchange", explicit_curve=True,
                       client_share_bytes=client_len,
                       problem="explicit curve parameters (not a named group)")


# -- certificates -----------------------------------------------------------------------
def certificate_info(der: bytes) -> CertificateInfo:
    """Summarise one DER certificate. Never an exception: garbage DER gives a placeholder,
    a key `cryptography` cannot load (explicit-curve EC, unknown algorithms) still gives
    subject and issuer, and oddities it warns about (a negative serial) are reported as
    they are."""
    from cryptography.exceptions import UnsupportedAlgorithm
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _certificate_info(der)
    except (UnsupportedAlgorithm, ValueError, TypeError) as exc:
        from tlsprobe.model.pubkey import load_certificate
        try:
            cert = load_certificate(der)
            subject, issuer = cert.subject.rfc4514_string(), cert.issuer.rfc4514_string()
        except ValueError:
            subject, issuer = "(unparsable certificate)", ""
        return CertificateInfo(subject, issuer, f"unsupported key ({exc})", None, "", "", "",
                               "", hashlib.sha256(der).hexdigest(),
                               sha1=hashlib.sha1(der).hexdigest())


def _certificate_info(der: bytes) -> CertificateInfo:
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm

    from tlsprobe.model.pubkey import load_certificate, pss_only, public_key
    digest, sha1 = hashlib.sha256(der).hexdigest(), hashlib.sha1(der).hexdigest()
    times: tuple[bytes | None, bytes | None] = (None, None)
    try:
        cert = load_certificate(der)
    except (ValueError, x509.InvalidVersion) as exc:  # (no ValueError: X.509 v2, v4+)
        twin = _twin(der)
        if twin is None:
            return _unparsed_info(der, exc, digest, sha1)
        cert, times = twin
    bits: int | None
    try:
        key_type, bits = _key_kind(public_key(cert), pss_only(cert))
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        # cryptography's UnsupportedAlgorithm (an EC key on an unknown curve) is no ValueError
        key_type, bits = f"unsupported key ({exc})", None
    try:
        sig = cert.signature_algorithm_oid._name
    except ValueError:
        sig = "unknown"
    return CertificateInfo(
        subject=_name(lambda: cert.subject), issuer=_name(lambda: cert.issuer),
        key_type=key_type, key_bits=bits, signature_algorithm=sig,
        not_before=_time(times[0], cert.not_valid_before_utc),
        not_after=_time(times[1], cert.not_valid_after_utc),
        serial=f"{cert.serial_number:x}", sha256=digest, san=_san(cert), sha1=sha1,
        **_extension_facts(cert))


def _time(odd: bytes | None, parsed: datetime.datetime) -> str:
    """A validity time in ISO form, or the one OpenSSL cannot compare as sent."""
    if odd is None:
        return parsed.isoformat()
    return f"{BAD_TIME} {odd.decode('latin-1')})"


#: how a validity time OpenSSL cannot compare (its 13, 14) is shown, before its text
BAD_TIME = "(format error:"


def _twin(der: bytes) -> tuple[Certificate, tuple[bytes | None, bytes | None]] | None:
    """A certificate `cryptography` refuses in a form OpenSSL reads, read through its twin
    (wire/dertwin.py: BER lengths, critical flags, strings of names, a time OpenSSL cannot
    compare), and those times as sent; None for any other."""
    from cryptography.x509 import InvalidVersion

    from tlsprobe.model.pubkey import load_certificate
    from tlsprobe.wire.dertwin import der_twin, uncomparable_times
    try:
        return load_certificate(der_twin(der, odd_times=True)), uncomparable_times(der)
    except (ValueError, InvalidVersion):   # (no ValueError: X.509 v2, v4+)
        return None


#: what a certificate `cryptography` does not parse shows where its names would be
NOT_READ = "(not read: the certificate does not parse)"


def _unparsed_info(der: bytes, exc: Exception, digest: str, sha1: str) -> CertificateInfo:
    """A certificate `cryptography` refuses: says so, with the key when its
    subjectPublicKeyInfo reads (model/pubkey.py `certificate_key`: OpenSSL reads such a
    certificate, and the server's signature was checked with that key)."""
    from cryptography.exceptions import UnsupportedAlgorithm

    from tlsprobe.model.pubkey import certificate_key
    bits: int | None
    try:
        key_type, bits = _key_kind(*certificate_key(der)) if isinstance(exc, ValueError) \
            else ("unknown", None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        key_type, bits = "unknown", None
    return CertificateInfo(f"(unparsable certificate: {exc})", NOT_READ, key_type, bits, "",
                           "", "", "", digest, san=(NOT_READ,), sha1=sha1)


def _key_kind(key: object, pss: bool) -> tuple[str, int | None]:
    """("RSA", 2048), ("EC secp256r1", 256), ... for a public key."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    from tlsprobe.model.pubkey import is_dsa_key
    if isinstance(key, rsa.RSAPublicKey):   # an RSASSA-PSS key may sign only with PSS
        return "RSA-PSS" if pss else "RSA", key.key_size
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"EC {key.curve.name}", key.curve.key_size
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "Ed25519", 256
    if isinstance(key, ed448.Ed448PublicKey):
        return "Ed448", 456
    if is_dsa_key(key):
        return "DSA", key.key_size
    return type(key).__name__.replace("PublicKey", ""), None


def _extension_facts(cert: Certificate) -> dict[str, tuple[str, ...]]:
    """extendedKeyUsage purposes, CRL distribution point URIs and AIA URIs (OCSP, CA
    issuers); an extension that is absent or does not parse gives nothing (the chain check
    and the trust verdict judge a broken certificate, not this summary)."""
    from cryptography import x509
    from cryptography.x509.oid import AuthorityInformationAccessOID as AIA

    def value(kind: type[x509.ExtensionType]) -> object:
        try:
            return cert.extensions.get_extension_for_class(kind).value
        except (x509.ExtensionNotFound, x509.DuplicateExtension, ValueError, TypeError):
            return None
    out: dict[str, tuple[str, ...]] = {}
    eku = value(x509.ExtendedKeyUsage)
    if isinstance(eku, x509.ExtendedKeyUsage):
        out["extended_key_usage"] = tuple(
            oid._name if oid._name != "Unknown OID" else oid.dotted_string for oid in eku)
    crl = value(x509.CRLDistributionPoints)
    if isinstance(crl, x509.CRLDistributionPoints):
        out["crl_urls"] = tuple(n.value for p in crl for n in p.full_name or ()
                                if isinstance(n, x509.UniformResourceIdentifier))
    aia = value(x509.AuthorityInformationAccess)
    if isinstance(aia, x509.AuthorityInformationAccess):
        for key, method in (("ocsp_urls", AIA.OCSP), ("ca_issuer_urls", AIA.CA_ISSUERS)):
            out[key] = tuple(d.access_location.value for d in aia
                             if d.access_method == method and
                             isinstance(d.access_location, x509.UniformResourceIdentifier))
    return out


def _other_name(name: object) -> str | None:
    """A subjectAltName entry that is no DNS name or address, as `openssl x509 -text`
    writes it (email:, URI:, DirName:, Registered ID:, othername:)."""
    from cryptography import x509
    if isinstance(name, (x509.RFC822Name, x509.UniformResourceIdentifier)):
        return f"{'email' if isinstance(name, x509.RFC822Name) else 'URI'}:{name.value}"
    if isinstance(name, x509.DirectoryName):
        return f"DirName:{_name(lambda: name.value)}"
    if isinstance(name, x509.RegisteredID):
        return f"Registered ID:{name.value.dotted_string}"
    if isinstance(name, x509.OtherName):
        return f"othername:{name.type_id.dotted_string}"
    return None


def _san(cert: Certificate) -> tuple[str, ...]:
    """The subjectAltName's DNS names and IP addresses, then its other entries (email:,
    URI:, ... as OpenSSL writes them); () only when the certificate has none: one that
    cryptography cannot read (a dNSName that is not IA5, DER it refuses, the extension
    twice) is one "(undecodable subjectAltName: ...)" entry, as an undecodable subject is,
    never the absence that certificate.no_san and `san` [] would state; nor is a
    subjectAltName of e-mail addresses or URIs alone. When another extension makes the
    list unreadable, the certificate's bytes tell whether it has one at all (a CA without
    one was said to have an undecodable one)."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.serialization import Encoding

    from tlsprobe.wire.spki import extension_oids
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    except (x509.DuplicateExtension, ValueError, TypeError, UnsupportedAlgorithm) as exc:
        try:
            absent = "2.5.29.17" not in extension_oids(cert.public_bytes(Encoding.DER))
        except ValueError:
            absent = False
        return () if absent else (f"(undecodable subjectAltName: {exc})",)
    return tuple(str(v) for v in names.get_values_for_type(x509.DNSName)) + \
        tuple(str(v) for v in names.get_values_for_type(x509.IPAddress)) + \
        tuple(text for text in map(_other_name, names) if text is not None)


def _name(get: Callable[[], Name]) -> str:
    """A subject or issuer as RFC 4514 text; names are decoded lazily and may be invalid."""
    try:
        return str(get().rfc4514_string())
    except (ValueError, TypeError) as exc:
        return f"(undecodable name: {exc})"


# -- SSL 2.0 ----------------------------------------------------------------------------
def sslv2_cipher(spec: int) -> Cipher:
    """A 3-byte SSLv2 cipher spec: 0x00XXYY is the TLS suite 0xXXYY; the others by their
    SSL 2.0 names; hex as tshark writes specs ("0x050080", "0x000039")."""
    if spec < 0x10000:
        tls = Cipher.of(spec)
        return Cipher(spec, f"0x{spec:06x}", tls.iana_name, tls.openssl_name)
    name, openssl = SSLV2_CIPHER_SPECS.get(spec, (f"SSL2_UNKNOWN_0x{spec:06x}", None))
    return Cipher(spec, f"0x{spec:06x}", name, openssl)
