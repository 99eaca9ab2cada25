"""Test PKI and DH parameter files for loopback TLS servers, built with `cryptography`.

One self-signed test CA signs RSA-2048, ECDSA P-256 and Ed25519 leaf certificates for
localhost / 127.0.0.1 / ::1, so clients can verify every server against a single CA file.
Each server implementation wants a slightly different file set (leaf only, leaf + CA chain,
PKCS#8 key), so all of them are written once per session.
"""
from __future__ import annotations

import base64
import datetime
import ipaddress
import warnings
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_KINDS = ("rsa", "ecdsa", "ed25519")

_PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@dataclass(frozen=True)
class CertFiles:
    """PEM files of one server identity: leaf certificate, private key, leaf + CA chain."""

    cert: Path
    key: Path
    chain: Path


@dataclass(frozen=True)
class CertSet:
    """The test CA and the server identities it signed (see ``CERT_KINDS``)."""

    directory: Path
    ca: Path
    leaves: dict[str, CertFiles]

    def __getitem__(self, kind: str) -> CertFiles:
        if kind not in self.leaves:
            raise ValueError(f"unknown certificate kind {kind!r} (have {', '.join(self.leaves)})")
        return self.leaves[kind]


def _new_key(kind: str, rsa_bits: int = 2048) -> _PrivateKey:
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
    if kind == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"unknown certificate kind {kind!r}")


def _key_pem(key: _PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _builder(subject: str, issuer: str, public_key: object, days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(public_key)  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=days)))


def named_set(directory: Path, cn: str, san: str, stem: str,
              curve: ec.EllipticCurve | None = None) -> CertSet:
    """A self-signed P-256 certificate (or one on `curve`) whose subject CN and DNS SAN are
    taken as they are (tests of untrusted text: escapes, markup), as an "ecdsa" CertSet in
    `directory`."""
    key = ec.generate_private_key(curve) if curve is not None else _new_key("ecdsa")
    cert = (_builder(cn, cn, key.public_key(), 2)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False)
            .sign(key, hashes.SHA256()))
    files = CertFiles(directory / f"{stem}.crt", directory / f"{stem}.key",
                      directory / f"{stem}.crt")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(_key_pem(key))
    return CertSet(directory, files.cert, {"ecdsa": files})


def rsa_pss_set(certs: CertSet, directory: Path, bits: int = 2048) -> CertSet:
    """`certs` plus an "rsa-pss" leaf: an RSASSA-PSS key (id-RSASSA-PSS, which may sign only
    with PSS) for localhost / 127.0.0.1, signed by the test CA. `cryptography` writes no such
    key, so the openssl command line makes it (the binary the openssl servers run)."""
    import shutil
    import subprocess
    directory.mkdir(parents=True, exist_ok=True)
    files = CertFiles(directory / "rsa-pss.crt", directory / "rsa-pss.key",
                      directory / "rsa-pss_chain.crt")
    openssl = shutil.which("openssl") or "openssl"
    ext = directory / "rsa-pss.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n"
                   "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
    for argv in (
            [openssl, "genpkey", "-algorithm", "RSA-PSS", "-pkeyopt", f"rsa_keygen_bits:{bits}",
             "-out", str(files.key)],
            [openssl, "req", "-new", "-key", str(files.key), "-subj", "/CN=localhost",
             "-out", str(directory / "rsa-pss.csr")],
            [openssl, "x509", "-req", "-in", str(directory / "rsa-pss.csr"), "-CA", str(certs.ca),
             "-CAkey", str(certs.directory / "ca.key"), "-days", "30", "-sha256",
             "-extfile", str(ext), "-out", str(files.cert)]):
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    files.chain.write_bytes(files.cert.read_bytes() + certs.ca.read_bytes())
    return CertSet(certs.directory, certs.ca, {**certs.leaves, "rsa-pss": files})


def signed_leaf(certs: CertSet, directory: Path, stem: str, kind: str, days: int,
                usages: tuple[str, ...] | None = None, extra_names: int = 0) -> CertFiles:
    """A leaf for localhost / 127.0.0.1 of key `kind` ("rsa", "ecdsa", "ed25519") signed by
    the test CA, valid for `days`, with a critical keyUsage of `usages` (cryptography's
    flag names: "digital_signature", "key_encipherment", ...; None: no keyUsage), as
    `stem`.crt / `stem`.key / `stem`_chain.crt (leaf + CA) in `directory`. `extra_names`
    more DNS names (24 bytes each) make a large certificate."""
    ca_key = serialization.load_pem_private_key((certs.directory / "ca.key").read_bytes(), None)
    key = _new_key(kind)
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))] +
        [x509.DNSName(f"host{i:05d}.example.test") for i in range(extra_names)])
    builder = _builder("localhost", "tlsprobe Test CA", key.public_key(), days) \
        .add_extension(san, critical=False)
    if usages is not None:
        builder = builder.add_extension(_key_usage(*usages), critical=True)
    cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    directory.mkdir(parents=True, exist_ok=True)
    files = CertFiles(directory / f"{stem}.crt", directory / f"{stem}.key",
                      directory / f"{stem}_chain.crt")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(_key_pem(key))
    files.chain.write_bytes(files.cert.read_bytes() + certs.ca.read_bytes())
    return files


def _key_usage(*allowed: str) -> x509.KeyUsage:
    flags = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
             "key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")
    return x509.KeyUsage(**{flag: flag in allowed for flag in flags})


def make_certs(directory: Path, rsa_bits: int = 2048) -> CertSet:
    """Write ca.crt/ca.key and <kind>.crt, <kind>.key, <kind>_chain.crt for every kind
    (`rsa_bits`: the RSA leaf's key size; the CA's is 2048)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_name = "tlsprobe Test CA"
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_cert = (_builder(ca_name, ca_name, ca_key.public_key(), 3650)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(_key_usage("key_cert_sign", "crl_sign"), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                              critical=False)
               .sign(ca_key, hashes.SHA256()))
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    (directory / "ca.crt").write_bytes(ca_pem)
    (directory / "ca.key").write_bytes(_key_pem(ca_key))
    san = x509.SubjectAlternativeName([
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ])
    leaves: dict[str, CertFiles] = {}
    for kind in CERT_KINDS:
        key = _new_key(kind, rsa_bits)
        cert = (_builder("localhost", ca_name, key.public_key(), 825)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(_key_usage("digital_signature",
                                          *(["key_encipherment"] if kind == "rsa" else [])),
                               critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False)
                .add_extension(san, critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256()))
        leaf_pem = cert.public_bytes(serialization.Encoding.PEM)
        files = CertFiles(directory / f"{kind}.crt", directory / f"{kind}.key",
                          directory / f"{kind}_chain.crt")
        files.cert.write_bytes(leaf_pem)
        files.key.write_bytes(_key_pem(key))
        files.chain.write_bytes(leaf_pem + ca_pem)
        leaves[kind] = files
    return CertSet(directory, directory / "ca.crt", leaves)


# Named finite-field groups: RFC 7919 (ffdhe*), RFC 3526 (modp*) and RFC 5114 (rfc5114_*).
# Primes come from tlslite-ng's tables, an implementation independent of tlsprobe.
_TLSLITE_DH_NAMES = {
    **{f"ffdhe{b}": f"RFC7919 ffdhe{b}" for b in (2048, 3072, 4096, 6144, 8192)},
    "modp1536": "RFC3526 group 5", "modp2048": "RFC3526 group 14", "modp3072": "RFC3526 group 15",
    "modp4096": "RFC3526 group 16", "modp6144": "RFC3526 group 17", "modp8192": "RFC3526 group 18",
    "rfc5114_1024_160": "RFC5114 group 22", "rfc5114_2048_224": "RFC5114 group 23",
    "rfc5114_2048_256": "RFC5114 group 24",
}
DH_NAMES = tuple(_TLSLITE_DH_NAMES)


def dh_numbers(name: str) -> tuple[int, int]:
    """(p, g) of a named finite-field group from ``DH_NAMES``."""
    with warnings.catch_warnings():  # tlslite-ng imports the deprecated asyncore
        warnings.simplefilter("ignore", DeprecationWarning)
        from tlslite.mathtls import FFDHE_PARAMETERS
    if name not in _TLSLITE_DH_NAMES:
        raise ValueError(f"unknown DH group {name!r} (known: {', '.join(DH_NAMES)})")
    g, p = FFDHE_PARAMETERS[_TLSLITE_DH_NAMES[name]]
    return p, g


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def _der_integer(n: int) -> bytes:
    raw = n.to_bytes(n.bit_length() // 8 + 1, "big")  # keeps a leading 0x00 when the top bit is set
    return b"\x02" + _der_length(len(raw)) + raw


def write_dhparam(name: str, directory: Path) -> Path:
    """Write the named group as a PKCS#3 'DH PARAMETERS' PEM file (as `-dhparam` wants).

    Encoded by hand (SEQUENCE { p, g }) because cryptography deprecates its FFDH API."""
    p, g = dh_numbers(name)
    body = _der_integer(p) + _der_integer(g)
    der = b"\x30" + _der_length(len(body)) + body
    b64 = base64.encodebytes(der).decode().replace("\n", "")
    lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
    path = Path(directory) / f"{name}.pem"
    path.write_text("-----BEGIN DH PARAMETERS-----\n" + "\n".join(lines)
                    + "\n-----END DH PARAMETERS-----\n")
    return path


def ed448_set(certs: CertSet, directory: Path) -> CertSet:
    """`certs` plus an "ed448" leaf for localhost / 127.0.0.1 / ::1, signed by the test CA
    (tests of a server with a certificate per key type)."""
    from cryptography.hazmat.primitives.asymmetric import ed448
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = serialization.load_pem_private_key((certs.directory / "ca.key").read_bytes(), None)
    ca_name = x509.load_pem_x509_certificate(certs.ca.read_bytes()).subject.rfc4514_string()
    key = ed448.Ed448PrivateKey.generate()
    san = x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                       x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (_builder("localhost", ca_name.removeprefix("CN="), key.public_key(), 30)
            .add_extension(_key_usage("digital_signature"), critical=True)
            .add_extension(san, critical=False)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    files = CertFiles(directory / "ed448.crt", directory / "ed448.key",
                      directory / "ed448_chain.crt")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    files.chain.write_bytes(files.cert.read_bytes() + certs.ca.read_bytes())
    return CertSet(certs.directory, certs.ca, {**certs.leaves, "ed448": files})
