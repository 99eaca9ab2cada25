"""A test PKI built with `cryptography` in a temp folder for the certificate checks: a root,
two intermediates (root -> A -> B), a leaf for localhost issued by B, a second leaf (another
name, for the chain served without SNI), an unrelated self-signed certificate (an extra
one), a delegated OCSP responder, and OCSP responses about the leaf (good, revoked, expired,
about another serial, with a bad signature, from a delegated responder). P-256 keys: fast
to make. Each PEM file is written once; `chain_file(*names)` writes the leaf followed by
the named certificates, in that order, as a server's full-chain file."""
from __future__ import annotations

import datetime
import ipaddress
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import ocsp
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.lab_servers.certs import CertFiles, CertSet

NOW = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
DAY = datetime.timedelta(days=1)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Pki:
    """The certificates and keys by name ("root", "a", "b", "leaf", "other", "stray",
    "lapsed" (an expired CA of the root, on no path of the leaf), "responder"), written
    under `directory`."""

    directory: Path
    certs: dict[str, x509.Certificate] = field(default_factory=dict)
    keys: dict[str, ec.EllipticCurvePrivateKey] = field(default_factory=dict)

    def issue(self, name: str, cn: str, issuer: str | None, *, ca: bool,
              eku: list[x509.ObjectIdentifier] | None = None, san: str | None = None,
              aia: bool = False, expired: bool = False) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(cn)
        b = (x509.CertificateBuilder().subject_name(subject)
             .issuer_name(self.certs[issuer].subject if issuer else subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(NOW - 30 * DAY if expired else NOW)
             .not_valid_after(NOW - DAY if expired else NOW + 90 * DAY)
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if eku:
            b = b.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName(san), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
        if aia:
            b = b.add_extension(x509.AuthorityInformationAccess([
                x509.AccessDescription(x509.oid.AuthorityInformationAccessOID.OCSP,
                                       x509.UniformResourceIdentifier("http://ocsp.test/")),
                x509.AccessDescription(x509.oid.AuthorityInformationAccessOID.CA_ISSUERS,
                                       x509.UniformResourceIdentifier("http://ca.test/b.crt"))]),
                critical=False)
            b = b.add_extension(x509.CRLDistributionPoints([x509.DistributionPoint(
                [x509.UniformResourceIdentifier("http://crl.test/b.crl")], None, None, None)]),
                critical=False)
        signer = self.keys[issuer] if issuer else key
        if ca:
            b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                              False, False), critical=True)
        if issuer:   # the CA/Browser Forum profile the trust verdict checks asks for both
            b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                signer.public_key()), critical=False)
        cert = b.sign(signer, hashes.SHA256())
        self.certs[name], self.keys[name] = cert, key
        (self.directory / f"{name}.crt").write_bytes(_pem(cert))
        (self.directory / f"{name}.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))

    def openssl_leaf(self, name: str, start: str, end: str, md: str = "sha256") -> None:
        """A leaf for localhost issued by B with `openssl ca`, whose dates (YYYYMMDDHHMMSSZ)
        and signature digest `md` are as given: `cryptography` refuses to build a notAfter
        before notBefore, or to sign with SHA-1, which a server's certificate may hold."""
        work = self.directory / f"ca-{name}"
        (work / "new").mkdir(parents=True, exist_ok=True)
        (work / "index.txt").write_text("")
        (work / "serial").write_text("1000\n")
        (work / "ca.cnf").write_text(
            f"[ca]\ndefault_ca = c\n[c]\ndatabase = {work}/index.txt\n"
            f"new_certs_dir = {work}/new\nserial = {work}/serial\ndefault_md = sha256\n"
            "policy = p\nunique_subject = no\n[p]\ncommonName = supplied\n[ext]\n"
            "subjectAltName = DNS:localhost,IP:127.0.0.1\nextendedKeyUsage = serverAuth\n"
            "basicConstraints = critical,CA:false\n")
        key, csr = self.directory / f"{name}.key", work / "leaf.csr"
        subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-subj",
                        "/CN=localhost", "-out", str(csr)], check=True, capture_output=True)
        subprocess.run(["openssl", "ca", "-batch", "-config", str(work / "ca.cnf"), "-cert",
                        str(self.path("b")), "-keyfile", str(self.directory / "b.key"),
                        "-in", str(csr), "-startdate", start, "-enddate", end, "-md", md,
                        "-extensions",
                        "ext", "-notext", "-out", str(self.path(name))],
                       check=True, capture_output=True)
        self.certs[name] = x509.load_pem_x509_certificate(self.path(name).read_bytes())

    def openssl_root(self, name: str, cn: str, md: str) -> None:
        """A self-signed root made by `openssl req -x509` with digest `md` (`cryptography`
        refuses to sign with SHA-1), which `issue` can then issue from."""
        key = ec.generate_private_key(ec.SECP256R1())
        key_file = self.directory / f"{name}.key"
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        subprocess.run(["openssl", "req", "-x509", "-new", "-key", str(key_file), f"-{md}",
                        "-days", "30", "-subj", f"/CN={cn}", "-addext",
                        "basicConstraints=critical,CA:true", "-addext",
                        "keyUsage=critical,keyCertSign,cRLSign", "-out", str(self.path(name))],
                       check=True, capture_output=True)
        self.certs[name] = x509.load_pem_x509_certificate(self.path(name).read_bytes())
        self.keys[name] = key

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.crt"

    def chain_file(self, leaf: str, *rest: str) -> Path:
        """`leaf` then `rest`, in that order, in one PEM file (a full-chain file)."""
        out = self.directory / f"chain-{leaf}-{'-'.join(rest) or 'alone'}.pem"
        out.write_bytes(b"".join(_pem(self.certs[n]) for n in (leaf, *rest)))
        return out

    def cert_set(self, leaf: str, *rest: str) -> CertSet:
        """A CertSet for `start_server`: openssl s_server gets `-cert LEAF -cert_chain`
        the file of `rest` (its `ca`); nginx and gnutls-serv the full-chain file."""
        chain = self.chain_file(leaf, *rest)
        extra = self.directory / f"extra-{'-'.join(rest)}.pem"
        extra.write_bytes(b"".join(_pem(self.certs[n]) for n in rest))
        files = CertFiles(self.path(leaf), self.directory / f"{leaf}.key", chain)
        return CertSet(self.directory, extra, {"ecdsa": files})

    def ocsp(self, kind: str = "good") -> Path:
        """An OCSP response about the leaf, written to `ocsp-KIND.der`: good (signed by
        its issuer B), revoked, expired (nextUpdate a day ago), serial (about another
        certificate), badsig (B's signature with its last byte altered), delegated (signed by the
        responder that B issued with OCSPSigning), noeku (a delegated responder without it),
        revoked-badsig (revoked, with badsig's signature)."""
        leaf, issuer = self.certs["leaf"], self.certs["b"]
        about = self.certs["other"] if kind == "serial" else leaf
        status = ocsp.OCSPCertStatus.REVOKED if kind.startswith("revoked") else \
            ocsp.OCSPCertStatus.GOOD
        this, nxt = (NOW - 3 * DAY, NOW - DAY) if kind == "expired" else (NOW, NOW + 7 * DAY)
        b = ocsp.OCSPResponseBuilder().add_response(
            about, self.certs["a"] if kind == "serial" else issuer, hashes.SHA1(), status,
            this, nxt, NOW - DAY if kind.startswith("revoked") else None,
            x509.ReasonFlags.key_compromise if kind.startswith("revoked") else None)
        signer, key = "b", self.keys["b"]
        if kind in ("delegated", "noeku"):
            signer = "responder" if kind == "delegated" else "noeku"
            key = self.keys[signer]
            b = b.certificates([self.certs[signer]])
        b = b.responder_id(ocsp.OCSPResponderEncoding.HASH, self.certs[signer])
        der = b.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)
        if kind.endswith("badsig"):   # the signature (last in the DER, no certificates) altered
            der = der[:-1] + bytes([der[-1] ^ 0x01])
        out = self.directory / f"ocsp-{kind}.der"
        out.write_bytes(der)
        return out


def make_pki(directory: Path) -> Pki:
    pki = Pki(directory)
    pki.issue("root", "Test Root", None, ca=True)
    pki.issue("a", "Test Intermediate A", "root", ca=True)
    pki.issue("b", "Test Intermediate B", "a", ca=True)
    pki.issue("leaf", "localhost", "b", ca=False, eku=[ExtendedKeyUsageOID.SERVER_AUTH],
              san="localhost", aia=True)
    pki.issue("other", "default.test", "b", ca=False, san="default.test")
    pki.issue("stray", "Stray Self-Signed", None, ca=True)
    pki.issue("lapsed", "Lapsed Intermediate", "root", ca=True, expired=True)
    pki.issue("responder", "Test OCSP Responder", "b", ca=False,
              eku=[ExtendedKeyUsageOID.OCSP_SIGNING])
    pki.issue("noeku", "Test Responder Without EKU", "b", ca=False)
    return pki
