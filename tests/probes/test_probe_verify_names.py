"""The chain check apart from the host name: a leaf whose subjectAltName holds names the
verifier cannot parse or match (a partial wildcard, an address written as a DNS name, an
underscore label) has a good chain and a name that does or does not match; it is never
"unspecified certificate verification error" about a name made up from the leaf's own.
Real servers on loopback (`probe` and `scan`), certificates made here."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


class _Pki:
    """A root (its PEM: `self.ca`) and an intermediate whose extendedKeyUsage is serverAuth
    alone (as the CAs of today's public hierarchies have it), which issues P-256 leaves with
    the given DNS SANs; the server sends leaf and intermediate."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        root_key = ec.generate_private_key(ec.SECP256R1())
        root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Names Test Root")])
        root = self._ca(root_name, root_key, root_name, root_key, None)
        self.ca = _write(folder / "root.pem", root.public_bytes(serialization.Encoding.PEM))
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Names Test CA")])
        self.inter = self._ca(self.name, self.key, root_name, root_key,
                              ExtendedKeyUsageOID.SERVER_AUTH)

    @staticmethod
    def _base(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
              signer: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(NOW - DAY).not_valid_after(NOW + 30 * DAY)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    signer.public_key()), critical=False))

    def _ca(self, subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
            signer: ec.EllipticCurvePrivateKey, eku: x509.ObjectIdentifier | None
            ) -> x509.Certificate:
        b = (self._base(subject, key, issuer, signer)
             .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
             .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                          False, False), critical=True))
        if eku is not None:
            b = b.add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
        return b.sign(signer, hashes.SHA256())

    def leaf(self, stem: str, names: list[str], eku: x509.ObjectIdentifier
             = ExtendedKeyUsageOID.SERVER_AUTH,
             others: tuple[x509.GeneralName, ...] = ()) -> list[str]:
        """The pyssl server's arguments for a leaf with DNS SANs `names` (set raw, as a
        server's certificate may carry them), then `others`."""
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for value in names:
            dns = x509.DNSName.__new__(x509.DNSName)
            dns._value = value  # the constructor would refuse some: a server's may not
            sans.append(dns)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, stem)])
        cert = (self._base(subject, key, self.name, self.key)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.SubjectAlternativeName([*sans, *others]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
                .sign(self.key, hashes.SHA256()))
        chain = _write(self.folder / f"{stem}.pem", b"".join(
            c.public_bytes(serialization.Encoding.PEM) for c in (cert, self.inter)))
        key_file = _write(self.folder / f"{stem}.key", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        return ["--chain-file", str(chain), "--key-file", str(key_file)]


def _verification(res: Any) -> str:
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("Verification")]
    assert len(lines) == 1, res.stdout + res.stderr
    return re.sub(r"^Verification\s+", "", lines[0])


def test_probe_names_the_verifier_cannot_match(tls_server, run_cli, tmp_path) -> None:
    pki = _Pki(tmp_path)
    for stem, names in (("partial", ["f*.localhost"]), ("address", ["127.0.0.1"]),
                        ("double", ["*.*.localhost"])):
        srv = tls_server("pyssl", extra=pki.leaf(stem, names))
        line = _verification(run_cli(f"localhost:{srv.port}", "--cafile", pki.ca))
        assert line == "Verify return code: 62 (hostname mismatch): certificate is not valid " \
            "for localhost", (stem, line)
    srv = tls_server("pyssl", extra=pki.leaf("underscore", ["under_score.test"]))
    line = _verification(run_cli(f"127.0.0.1:{srv.port}", "--sni", "under_score.test",
                                 "--cafile", pki.ca))
    assert line == "Verify return code: 0 (ok)", line   # as openssl s_client matches it
    line = _verification(run_cli(f"127.0.0.1:{srv.port}", "--sni", "other.test",
                                 "--cafile", pki.ca))
    assert line.startswith("Verify return code: 62 (hostname mismatch)"), line
    # the leaf's extensions still count as for a server: a clientAuth-only leaf is refused
    srv = tls_server("pyssl", extra=pki.leaf("client", ["localhost"],
                                             ExtendedKeyUsageOID.CLIENT_AUTH))
    line = _verification(run_cli(f"localhost:{srv.port}", "--cafile", pki.ca))
    assert line == ("Verify return code: 26 (unsuitable certificate purpose): CN=client is "
                    "not for a TLS server: its extendedKeyUsage does not include serverAuth "
                    "(nor Server Gated Crypto)"), line


def test_internationalised_name_is_matched_as_its_a_label(tls_server, run_cli,
                                                         tmp_path) -> None:
    """--sni with a U-label: the server_name extension carries its A-label (IDNA), and the
    certificate is checked for that name, as a browser does."""
    pki = _Pki(tmp_path)
    srv = tls_server("pyssl", extra=pki.leaf("idna", ["xn--bcher-kva.test",
                                                      "*.xn--bcher-kva.test"]))
    for name in ("bücher.test", "WWW.BÜCHER.TEST"):
        line = _verification(run_cli(f"127.0.0.1:{srv.port}", "--sni", name,
                                     "--cafile", pki.ca))
        assert line == "Verify return code: 0 (ok)", (name, line)
    # a final dot is compared, as OpenSSL's X509_check_host does (test_engine_hostname_openssl)
    line = _verification(run_cli(f"127.0.0.1:{srv.port}", "--sni", "www.bücher.test.",
                                 "--cafile", pki.ca))
    assert line.startswith("Verify return code: 62 (hostname mismatch)"), line
    line = _verification(run_cli(f"127.0.0.1:{srv.port}", "--sni", "a.b.bücher.test",
                                 "--cafile", pki.ca))
    assert line == "Verify return code: 62 (hostname mismatch): certificate is not valid " \
        "for a.b.bücher.test", line
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--sni", "www.bücher.test", "--checks",
                  "cert", "--cafile", pki.ca, "--json", "--no-policy")
    trust = json.loads(res.stdout)["trust"]
    assert (trust["code"], trust["hostname_ok"]) == (0, True), trust


def test_good_chain_for_another_name_is_a_name_mismatch(tls_server, run_cli,
                                                        tmp_path) -> None:
    """A leaf for another name, under a CA whose EKU is serverAuth alone: 62 (the chain
    judged apart from the name keeps the server's EKU rule, not the client verifier's)."""
    pki = _Pki(tmp_path)
    srv = tls_server("pyssl", extra=pki.leaf("elsewhere", ["elsewhere.test"]))
    line = _verification(run_cli(f"localhost:{srv.port}", "--cafile", pki.ca))
    assert line == "Verify return code: 62 (hostname mismatch): certificate is not valid " \
        "for localhost", line
    line = _verification(run_cli(f"127.0.0.1:{srv.port}", "--sni", "elsewhere.test",
                                 "--cafile", pki.ca))
    assert line == "Verify return code: 0 (ok)", line


def test_scan_trust_of_a_partial_wildcard(tls_server, run_cli, tmp_path) -> None:
    pki = _Pki(tmp_path)
    srv = tls_server("pyssl", extra=pki.leaf("partial", ["f*.localhost"]))
    res = run_cli("scan", f"localhost:{srv.port}", "--checks", "cert", "--cafile", pki.ca,
                  "--json", "--no-policy")
    trust = json.loads(res.stdout)["trust"]
    assert (trust["status"], trust["code"], trust["hostname_ok"]) == ("untrusted", 62, False), \
        trust


def test_subject_alt_name_of_uris_and_emails_is_shown_not_called_absent(
        tls_server, run_cli, tmp_path) -> None:
    """A subjectAltName holding a URI and an e-mail address only: shown as OpenSSL writes
    them, never "none (no subjectAltName)" nor the certificate.no_san finding (it has one;
    no DNS name in it matches, which the trust verdict says)."""
    pki = _Pki(tmp_path)
    srv = tls_server("pyssl", extra=pki.leaf("uri", [], others=(
        x509.UniformResourceIdentifier("https://localhost/"), x509.RFC822Name("a@b.test"))))
    res = run_cli(f"localhost:{srv.port}", "--cafile", pki.ca)
    assert "  SAN: URI:https://localhost/, email:a@b.test" in res.stdout, res.stdout
    assert "no subjectAltName" not in res.stdout, res.stdout
    res = run_cli("scan", f"localhost:{srv.port}", "--checks", "cert", "--cafile", pki.ca,
                  "--json")
    doc = json.loads(res.stdout)
    assert doc["certificates"][0]["san"] == ["URI:https://localhost/", "email:a@b.test"]
    codes = [f["code"] for f in doc["findings"]]
    assert "certificate.no_san" not in codes and "certificate.hostname_mismatch" in codes, codes
