"""Certificates in a BER form OpenSSL reads and `cryptography` refuses, made by editing DER.

`issued` makes a CA and a leaf with `cryptography`; `mangled` rewrites one field of the
leaf's tbsCertificate (a length in a longer form than DER allows, a UTCTime without
seconds) and signs the new tbsCertificate with the CA's key, so that the signature is valid
over the bytes as sent: OpenSSL trusts the result (or names the field it refuses), while
`x509.load_der_x509_certificate` raises ValueError for the whole certificate.
"""
from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from tlsprobe.wire.ber import der_element

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def tlv(tag: int, value: bytes, *, long: bool = False) -> bytes:
    """One element; `long`: its length in the long form even when the short one fits (BER),
    with one more length byte than needed."""
    n = len(value)
    if n < 0x80 and not long:
        return bytes([tag, n]) + value
    raw = n.to_bytes((n.bit_length() + 7) // 8 or 1, "big")
    if long:
        raw = b"\x00" + raw
    return bytes([tag, 0x80 | len(raw)]) + raw + value


def children(der: bytes) -> list[bytes]:
    """The elements inside the one element `der` (whole, header included)."""
    _, at, end = der_element(der, 0, len(der))
    out = []
    while at < end:
        _, _, stop = der_element(der, at, end)
        out.append(der[at:stop])
        at = stop
    return out


def contents(der: bytes) -> bytes:
    _, start, end = der_element(der, 0, len(der))
    return der[start:end]


def _long(element: bytes) -> bytes:
    return tlv(element[0], contents(element), long=True)


def indefinite(element: bytes) -> bytes:
    """A constructed element with an indefinite length (BER: 0x80, its contents, then the
    end-of-contents 00 00), as OpenSSL's d2i reads it and `cryptography` refuses it."""
    return bytes([element[0], 0x80]) + contents(element) + b"\x00\x00"


def _utc_without_seconds(validity: bytes) -> bytes:
    not_before, not_after = children(validity)
    assert not_before[0] == 0x17, "a UTCTime"
    return tlv(0x30, tlv(0x17, contents(not_before)[:10] + b"Z") + not_after)


def _rsa_key_long(spki: bytes) -> bytes:
    """An RSA subjectPublicKeyInfo whose RSAPublicKey's lengths are all in the long form."""
    algorithm, bits = children(spki)
    key = contents(bits)[1:]
    modulus, exponent = children(key)
    inner = tlv(0x30, _long(modulus) + _long(exponent), long=True)
    return tlv(0x30, algorithm + tlv(0x03, b"\x00" + inner, long=True), long=True)


def _printable_at(subject: bytes) -> bytes:
    """The first attribute's value as a PrintableString holding '@', which that type does
    not allow (X.680 41.4): OpenSSL reads it, cryptography refuses the name."""
    (rdn,) = children(subject)[:1]
    (attribute,) = children(rdn)
    oid, _ = children(attribute)
    return tlv(0x30, tlv(0x31, tlv(0x30, oid + tlv(0x13, b"local@host"))))


def _ia5_latin1(subject: bytes) -> bytes:
    """The first attribute's value as an IA5String holding a byte above 0x7F, which that
    type does not allow: OpenSSL reads it (as the Latin-1 character), cryptography
    refuses the name."""
    (rdn,) = children(subject)[:1]
    (attribute,) = children(rdn)
    oid, _ = children(attribute)
    return tlv(0x30, tlv(0x31, tlv(0x30, oid + tlv(0x16, b"loc\xe9l"))))


def printable(name: bytes) -> bytes:
    """Every attribute value of a Name as a PrintableString of the same bytes: a value
    holding '@' (which that type does not allow) makes `cryptography` refuse the whole
    certificate, even in DER, while OpenSSL reads it and compares it (X509_NAME_cmp) as
    the same name written as a UTF8String."""
    rdns = []
    for rdn in children(name):
        attributes = [tlv(0x30, children(a)[0] + tlv(0x13, contents(children(a)[1])))
                      for a in children(rdn)]
        rdns.append(tlv(0x31, b"".join(attributes)))
    return tlv(0x30, b"".join(rdns))


#: tbsCertificate field index (version first) -> how it is rewritten
EDITS: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
    "serial-long-length": (1, _long),
    "issuer-long-length": (3, _long),
    "spki-long-length": (6, _long),
    "utctime-without-seconds": (4, _utc_without_seconds),
    "rsa-key-long-lengths": (6, _rsa_key_long),
    "subject-printablestring-at": (5, _printable_at),
    "issuer-printablestring": (3, printable),
    "subject-ia5string-latin1": (5, _ia5_latin1),
    "version-v1-written-out": (0, lambda _: tlv(0xA0, tlv(0x02, b"\x00"))),
    "version-v2": (0, lambda _: tlv(0xA0, tlv(0x02, b"\x01"))),
    "version-v4": (0, lambda _: tlv(0xA0, tlv(0x02, b"\x03"))),
    "issuer-indefinite-length": (3, indefinite),
    "spki-indefinite-length": (6, indefinite),
}
#: the whole tbsCertificate, or the whole Certificate, with an indefinite length; the
#: signature's AlgorithmIdentifier (in the tbsCertificate and after it) with parameters
#: ecdsa-with-SHA256 does not take (an INTEGER): OpenSSL reads the certificate and checks
#: its signature, cryptography refuses it, and no DER twin reads it (wire/dertwin.py)
WHOLE_EDITS = ("tbs-indefinite-length", "certificate-indefinite-length",
               "algorithm-parameters")
#: no edit: the certificate signed again as it is (after its bytes were edited by hand)
RESIGNED = "resigned"


@dataclass(frozen=True)
class Issued:
    ca_key: ec.EllipticCurvePrivateKey
    ca_der: bytes
    leaf_key: PrivateKey
    leaf_der: bytes


def cn_name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def issued(leaf_key: PrivateKey | None = None, ca_name: str = "BER Test CA") -> Issued:
    """A CA (P-256) named `ca_name` and a leaf for localhost and 127.0.0.1 it signed, valid
    now."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = x509.CertificateBuilder().subject_name(cn_name(ca_name)) \
        .issuer_name(cn_name(ca_name)).public_key(ca_key.public_key()).serial_number(1) \
        .not_valid_before(now - datetime.timedelta(days=1)) \
        .not_valid_after(now + datetime.timedelta(days=30)) \
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True) \
        .sign(ca_key, hashes.SHA256())
    key = leaf_key or ec.generate_private_key(ec.SECP256R1())
    leaf = x509.CertificateBuilder().subject_name(cn_name("localhost")) \
        .issuer_name(cn_name(ca_name)).public_key(key.public_key()) \
        .serial_number(0x1234).not_valid_before(now - datetime.timedelta(days=1)) \
        .not_valid_after(now + datetime.timedelta(days=30)) \
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False) \
        .sign(ca_key, hashes.SHA256())
    der = serialization.Encoding.DER
    return Issued(ca_key, ca.public_bytes(der), key, leaf.public_bytes(der))


def mangled(chain: Issued, edit: str, *, ca: bool = False) -> bytes:
    """The leaf (`ca`: the CA) with `edit` (a key of EDITS, or of WHOLE_EDITS) applied,
    signed again by the CA (over the tbsCertificate's bytes as sent)."""
    tbs, algorithm, _ = children(chain.ca_der if ca else chain.leaf_der)
    fields = children(tbs)
    if edit in EDITS:
        index, rewrite = EDITS[edit]
        fields[index] = rewrite(fields[index])
    elif edit not in (*WHOLE_EDITS, RESIGNED):
        raise KeyError(edit)
    if edit == "algorithm-parameters":
        algorithm = tlv(0x30, children(algorithm)[0] + b"\x02\x01\x00")
        fields[2] = algorithm
    new_tbs = tlv(0x30, b"".join(fields))
    if edit == "tbs-indefinite-length":
        new_tbs = indefinite(new_tbs)
    signature = chain.ca_key.sign(new_tbs, ec.ECDSA(hashes.SHA256()))
    whole = tlv(0x30, new_tbs + algorithm + tlv(0x03, b"\x00" + signature))
    return indefinite(whole) if edit == "certificate-indefinite-length" else whole


def pem(der: bytes) -> bytes:
    """PEM of DER bytes as they are (OpenSSL keeps the tbsCertificate's bytes it read)."""
    body = base64.encodebytes(der).decode().replace("\n", "")
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return ("-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) +
            "\n-----END CERTIFICATE-----\n").encode()


def write(chain: Issued, leaf_der: bytes, folder: Path) -> tuple[Path, Path, Path]:
    """(CA PEM, leaf PEM, leaf key PEM) in `folder`."""
    ca = folder / "ca.pem"
    ca.write_bytes(pem(chain.ca_der))
    return (ca, *leaf_files(folder, leaf_der, chain.leaf_key))


def leaf_files(folder: Path, leaf_der: bytes, leaf_key: PrivateKey) -> tuple[Path, Path]:
    """(leaf PEM, leaf key PEM: PKCS#8) in `folder`, as a server's -cert and -key."""
    leaf, key = folder / "leaf.pem", folder / "leaf.key"
    leaf.write_bytes(pem(leaf_der))
    key.write_bytes(leaf_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return leaf, key


def signed_cert(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
                signer: ec.EllipticCurvePrivateKey, ca: bool) -> bytes:
    """A certificate (DER) of `key` named `subject`, signed by `signer` as `issuer`, valid
    from a day ago for 30 days: a CA (basicConstraints, critical) or a leaf for localhost."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost")]), critical=False)
    return builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.DER)
