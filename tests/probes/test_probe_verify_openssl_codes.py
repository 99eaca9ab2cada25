"""The trust verdict gives the code `openssl s_client -verify_return_error -verify_hostname`
gives on the same chain, with OpenSSL's text for it: each chain is served by openssl
s_server on loopback, s_client's "Verify return code" is read first (the reference), then
tlsprobe's. Before, tlsprobe said 62 for a leaf whose subject CN (no subjectAltName) or
partial wildcard (`f*.example.test`) OpenSSL matches, 0 for an RSA-1024 leaf or an
anyExtendedKeyUsage-only leaf OpenSSL refuses (66, 26), 1 with the library's words for an
issuer that is no CA (79), an EKU without serverAuth (26), a name constraint (47, 48), a
path length (25) or a weak CA key (67), 10 for an expired leaf of another name (OpenSSL
checks the name first: 62), 1 for a leaf that says CA:TRUE (OpenSSL trusts it), and 20 or
21 for a certificate its named issuer did not sign (7), and took a store certificate of the
issuer's name whose key is of another family than the signature for the issuer (20). It
said 1 for a critical extension OpenSSL does not handle (34), 0 for a trust store holding
a copy of the intermediate or the leaf but no root (OpenSSL anchors at self-signed ones
only: 2, 20) and for a host name with a final dot (62), 79 for a store root without
basicConstraints but with a keyUsage or of version 1 (OpenSSL trusts them), 0 for a leaf
whose Netscape certificate type is not SSL server (26), and 1 (untrusted, a finding that
fails `--fail-on high`) for chains OpenSSL trusts and cryptography's verifier refuses (an
RSA-2000 or Ed25519 CA key, a leading-dot name constraint, a version 1 root, a negative serial number): their verdict is now not
established (code null, `certificate.not_verified`). A leaf whose serial number is not
positive put cryptography's deprecation warning on tlsprobe's stderr. A leaf whose
authorityKeyIdentifier names another key than the sent intermediate's was 0: OpenSSL's
issuer check refuses that intermediate (20), and the library's acceptance of a path
OpenSSL cannot build was taken for a verdict. A subject email address outside a CA's
email name constraints (47, 48) was 0. An address the leaf does not hold was 62 (hostname
mismatch), where `-verify_ip` says 64 (IP address mismatch). A CA whose
basicConstraints are not critical was 1 (untrusted): OpenSSL trusts it, and so does
tlsprobe now."""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.timezone.utc)
DAY = datetime.timedelta(days=1)
ANY_EKU = x509.ObjectIdentifier("2.5.29.37.0")
CA_USAGE = x509.KeyUsage(False, False, False, False, False, True, True, False, False)

Key = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
#: an extension OpenSSL does not handle (X509_supported_extension): critical, it is 34
NETSCAPE_CLIENT = x509.UnrecognizedExtension(x509.ObjectIdentifier("2.16.840.1.113730.1.1"),
                                             b"\x03\x02\x07\x80")   # SSL client only
SKI_2 = x509.SubjectKeyIdentifier(b"\x02" * 20)
AKI_1 = x509.AuthorityKeyIdentifier(b"\x01" * 20, None, None)
AKI_2 = x509.AuthorityKeyIdentifier(b"\x02" * 20, None, None)
UNKNOWN = x509.UnrecognizedExtension(x509.ObjectIdentifier("1.3.6.1.4.1.99999.1"), b"\x05\x00")


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


@dataclass
class Case:
    """A root -> intermediate -> leaf chain, P-256 unless a key is given; the leaf has the
    DNS names `dns` (written as they are: a server's may be any text) and the EKU `eku`."""

    host: str = "localhost"
    dns: tuple[str, ...] = ("localhost",)
    eku: tuple[x509.ObjectIdentifier, ...] = (ExtendedKeyUsageOID.SERVER_AUTH,)   # () none
    leaf_key: Callable[[], Key] | None = None
    inter_key: Callable[[], Key] | None = None
    inter_ca: bool = True
    leaf_ca: bool = False
    root_path_length: int | None = None
    constraints: x509.NameConstraints | None = None
    leaf_days: tuple[int, int] = (-1, 30)
    forged: str = ""   # "leaf" or "intermediate": signed by a key other than its issuer's
    #: the trust store holds another root of the same name, with a key of this kind (the
    #: intermediate's ECDSA signature then has an issuer by name whose key cannot make it)
    store_root_key: Callable[[], Key] | None = None
    #: more extensions of the leaf and of the intermediate, (extension, critical)
    leaf_extra: tuple[tuple[x509.ExtensionType, bool], ...] = ()
    inter_extra: tuple[tuple[x509.ExtensionType, bool], ...] = ()
    inter_bc_critical: bool = True
    #: the intermediate's basicConstraints as these bytes (an UnrecognizedExtension of its OID)
    inter_bc_raw: x509.ExtensionType | None = None
    #: the leaf's subject CN
    leaf_cn: str = "localhost"
    #: the leaf's basicConstraints as these bytes
    leaf_bc_raw: x509.ExtensionType | None = None
    #: the root's extensions, when not basicConstraints CA:TRUE and keyUsage
    root_exts: tuple[tuple[x509.ExtensionType, bool], ...] | None = None
    #: the trust store: the root, or (without it) a copy of the intermediate or the leaf
    store: str = "root"
    #: the root is a version 1 certificate (no extensions), made by `openssl x509 -req`
    root_v1: bool = False
    #: the leaf is issued again by `openssl x509 -req` with this serial number (the library
    #: builds positive ones only), with the subjectAltName `dns`
    leaf_serial: int | None = None
    #: an emailAddress attribute in the leaf's subject (an IA5String, or this attribute)
    leaf_email: str | x509.NameAttribute[str] | None = None


def _p256() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def _rsa1024() -> Key:
    return rsa.generate_private_key(65537, 1024)


def _rsa2048() -> Key:
    return rsa.generate_private_key(65537, 2048)


def _rsa2000() -> Key:
    return rsa.generate_private_key(65537, 2000)


def _ed25519() -> Key:
    return ed25519.Ed25519PrivateKey.generate()


def _cert(subject: str, key: Key, issuer: str, signer: Key,
          exts: list[tuple[x509.ExtensionType, bool]], days: tuple[int, int] = (-1, 30),
          email: str | x509.NameAttribute[str] | None = None) -> x509.Certificate:
    attr = email if isinstance(email, x509.NameAttribute) or email is None else \
        x509.NameAttribute(NameOID.EMAIL_ADDRESS, email)
    name = _name(subject) if attr is None else x509.Name([*_name(subject), attr])
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(_name(issuer))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(NOW + days[0] * DAY).not_valid_after(NOW + days[1] * DAY))
    for ext, critical in exts:
        b = b.add_extension(ext, critical=critical)
    return b.sign(signer, None if isinstance(signer, ed25519.Ed25519PrivateKey)
                  else hashes.SHA256())


def _dns(value: str) -> x509.DNSName:
    name = x509.DNSName.__new__(x509.DNSName)
    name._value = value   # the constructor refuses some names a server's certificate holds
    return name


def _v1_root(key: Key, folder: Path) -> x509.Certificate:
    """A self-signed version 1 certificate of `key` named Codes Root (the library builds
    version 3 only)."""
    pem = serialization.Encoding.PEM
    (folder / "v1.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    csr = (x509.CertificateSigningRequestBuilder().subject_name(_name("Codes Root"))
           .sign(key, hashes.SHA256()))
    (folder / "v1.csr").write_bytes(csr.public_bytes(pem))
    subprocess.run(["openssl", "x509", "-req", "-in", str(folder / "v1.csr"), "-signkey",
                    str(folder / "v1.key"), "-days", "30", "-out", str(folder / "v1.pem")],
                   capture_output=True, timeout=30, check=True)
    root = x509.load_pem_x509_certificate((folder / "v1.pem").read_bytes())
    assert root.version == x509.Version.v1
    return root


def _build(case: Case, folder: Path) -> tuple[Path, Path, Path, Path]:
    """(root PEM, leaf PEM, leaf key PEM, intermediate PEM)."""
    root_key, inter_key = _p256(), (case.inter_key or _p256)()
    leaf_key = (case.leaf_key or _p256)()
    root = _cert("Codes Root", root_key, "Codes Root", root_key, [
        (x509.BasicConstraints(ca=True, path_length=case.root_path_length), True),
        (CA_USAGE, True)] if case.root_exts is None else list(case.root_exts))
    inter_exts: list[tuple[x509.ExtensionType, bool]] = [
        (case.inter_bc_raw or x509.BasicConstraints(ca=case.inter_ca, path_length=None),
         case.inter_bc_critical),
        (CA_USAGE, True), *case.inter_extra]
    if case.constraints is not None:
        inter_exts.append((case.constraints, True))
    if case.root_v1:
        root = _v1_root(root_key, folder)
    inter = _cert("Codes CA", inter_key, "Codes Root",
                  _p256() if case.forged == "intermediate" else root_key, inter_exts)
    leaf_exts: list[tuple[x509.ExtensionType, bool]] = [
        (case.leaf_bc_raw or x509.BasicConstraints(ca=case.leaf_ca, path_length=None), True),
        *([(x509.ExtendedKeyUsage(list(case.eku)), False)] if case.eku else []),
        *case.leaf_extra]
    if case.dns:
        leaf_exts.append((x509.SubjectAlternativeName([_dns(d) for d in case.dns]), False))
    leaf = _cert(case.leaf_cn, leaf_key, "Codes CA",
                 _p256() if case.forged == "leaf" else inter_key, leaf_exts, case.leaf_days,
                 case.leaf_email)
    pem = serialization.Encoding.PEM
    paths = (folder / "root.pem", folder / "leaf.pem", folder / "leaf.key",
             folder / "inter.pem")
    if case.store_root_key is not None:
        other = case.store_root_key()
        root = _cert("Codes Root", other, "Codes Root", other, [
            (x509.BasicConstraints(ca=True, path_length=None), True), (CA_USAGE, True)])
    paths[0].write_bytes({"root": root, "inter": inter, "leaf": leaf}[case.store]
                         .public_bytes(pem))
    paths[1].write_bytes(leaf.public_bytes(pem))
    paths[2].write_bytes(leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    paths[3].write_bytes(inter.public_bytes(pem))
    if case.leaf_serial is not None:
        _openssl_leaf(case, folder, inter_key, leaf_key)
    return paths


def _openssl_leaf(case: Case, folder: Path, inter_key: Key, leaf_key: Key) -> None:
    """leaf.pem issued again by `openssl x509 -req` with serial number `case.leaf_serial`."""
    pem = serialization.Encoding.PEM
    (folder / "inter.key").write_bytes(inter_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    csr = (x509.CertificateSigningRequestBuilder().subject_name(_name("localhost"))
           .sign(leaf_key, hashes.SHA256()))
    (folder / "leaf.csr").write_bytes(csr.public_bytes(pem))
    (folder / "san.ext").write_text("subjectAltName=" + ",".join(f"DNS:{d}" for d in case.dns))
    subprocess.run(["openssl", "x509", "-req", "-in", str(folder / "leaf.csr"), "-CA",
                    str(folder / "inter.pem"), "-CAkey", str(folder / "inter.key"),
                    "-set_serial", str(case.leaf_serial), "-days", "30", "-extfile",
                    str(folder / "san.ext"), "-out", str(folder / "leaf.pem")],
                   capture_output=True, timeout=30, check=True)


def _openssl_verdict(port: int, cafile: Path, host: str) -> tuple[int, str]:
    """s_client's "Verify return code: N (text)" for the server, checking `host` (an
    address with -verify_ip, and no server_name)."""
    name = ["-verify_ip", host] if _is_address(host) else \
        ["-servername", host, "-verify_hostname", host]
    proc = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                           "-CAfile", str(cafile), *name, "-verify_return_error"], input="",
                          capture_output=True,
                          text=True, timeout=30, check=False)
    found = re.findall(r"Verify return code: (\d+) \((.*)\)", proc.stdout)
    assert found, proc.stdout + proc.stderr
    return int(found[-1][0]), found[-1][1]


def served_verdicts(tls_server: Callable[..., Any], run_cli: Callable[..., Any], case: Case,
                    chain: tuple[Path, Path, Path, Path], *extra: str
                    ) -> tuple[int, str, dict[str, Any]]:
    """Serve `chain` (`_build`'s root, leaf, key, intermediate) with openssl s_server
    (`extra`: more of its arguments), and read s_client's verdict first, then tlsprobe's
    (`--json`, which must exit 0 with nothing on stderr): (s_client's code, its text,
    tlsprobe's `verification` object)."""
    root, leaf, key, inter = chain
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter), *extra])
    code, text = _openssl_verdict(srv.port, root, case.host)   # the real tool first
    sni = () if _is_address(case.host) else ("--sni", case.host)
    res = run_cli(f"127.0.0.1:{srv.port}", *sni, "--cafile", root, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    return code, text, json.loads(res.stdout)["verification"]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


PERMIT_EXAMPLE = x509.NameConstraints(permitted_subtrees=[x509.DNSName("example.test")],
                                      excluded_subtrees=None)
PERMIT_BELOW_EXAMPLE = x509.NameConstraints(permitted_subtrees=[_dns(".example.test")],
                                            excluded_subtrees=None)
PERMIT_EMAIL = x509.NameConstraints(permitted_subtrees=[x509.RFC822Name("example.test")],
                                    excluded_subtrees=None)
EXCLUDE_EMAIL = x509.NameConstraints(permitted_subtrees=None,
                                     excluded_subtrees=[x509.RFC822Name("other.test")])
EXCLUDE_LOCALHOST = x509.NameConstraints(permitted_subtrees=None,
                                         excluded_subtrees=[x509.DNSName("localhost")])

CASES = {
    # (the chain, the code OpenSSL 3 gives for it: checked against s_client first)
    "cn-only": (Case(dns=()), 0),
    "partial-wildcard": (Case(host="foo.example.test", dns=("f*.example.test",)), 0),
    "rsa1024-leaf": (Case(leaf_key=_rsa1024), 66),
    "rsa1024-intermediate": (Case(inter_key=_rsa1024), 67),
    "intermediate-ca-false": (Case(inter_ca=False), 79),
    "leaf-eku-client": (Case(eku=(ExtendedKeyUsageOID.CLIENT_AUTH,)), 26),
    "leaf-eku-any": (Case(eku=(ANY_EKU,)), 26),
    "permitted-subtree": (Case(constraints=PERMIT_EXAMPLE), 47),
    "excluded-subtree": (Case(constraints=EXCLUDE_LOCALHOST), 48),
    "path-length": (Case(root_path_length=0), 25),
    "expired-other-name": (Case(dns=("other.test",), leaf_days=(-30, -1)), 62),
    "leaf-ca-true": (Case(leaf_ca=True), 0),
    # the issuer by name is there (sent, or in the store): its key does not verify the
    # signature; tlsprobe said 21 "the server sent no issuer" and 20 "issuer CN=Codes Root
    # ... is not in the trust store", which it is
    "forged-leaf": (Case(forged="leaf"), 7),
    "forged-intermediate": (Case(forged="intermediate"), 7),
    # the store's root of that name holds an RSA key, the intermediate an ECDSA signature:
    # OpenSSL's issuer check refuses a key of another family (no issuer: 20); tlsprobe took
    # the unverifiable pair for "cannot be checked here" and the root for the issuer
    "issuer-key-of-another-family": (Case(store_root_key=_rsa2048), 20),
    # a critical extension OpenSSL does not handle, in the leaf or a CA: tlsprobe said 1
    "leaf-unknown-critical-extension": (Case(leaf_extra=((UNKNOWN, True),)), 34),
    "intermediate-unknown-critical-extension": (Case(inter_extra=((UNKNOWN, True),)), 34),
    "leaf-unknown-extension-not-critical": (Case(leaf_extra=((UNKNOWN, False),)), 0),
    # a leaf's Netscape certificate type without SSL server: tlsprobe said 0
    "leaf-netscape-type-ssl-client": (Case(leaf_extra=((NETSCAPE_CLIENT, False),)), 26),
    # a trust store certificate that is not self-signed is no anchor (OpenSSL without
    # -partial_chain): tlsprobe said 0 for both
    "store-holds-the-intermediate-only": (Case(store="inter"), 2),
    "store-holds-the-leaf-only": (Case(store="leaf"), 20),
    # a host name's final dot is compared (X509_check_host): tlsprobe stripped it, 0
    "host-name-with-final-dot": (Case(host="localhost."), 62),
    # an address the certificate does not hold is 64 for -verify_ip: tlsprobe said 62
    "address-not-in-the-certificate": (Case(host="127.0.0.1"), 64),
    # a trust store root without basicConstraints is a CA for OpenSSL when it has a
    # keyUsage (only at the top of the path): tlsprobe said 79
    "root-keyusage-without-basicconstraints": (Case(root_exts=((CA_USAGE, True),)), 0),
    "root-version-1": (Case(root_v1=True), 0),
    # the library's CA policy asked basicConstraints to be critical: tlsprobe said 1
    # (untrusted); now told it may be either, it verifies the chain as OpenSSL does
    "intermediate-basicconstraints-not-critical": (Case(inter_bc_critical=False), 0),
    "leaf-negative-serial": (Case(leaf_serial=-5), 0),
    # the leaf's authorityKeyIdentifier names another key than the intermediate's
    # subjectKeyIdentifier: OpenSSL's issuer check refuses the intermediate (the library
    # ignores it: tlsprobe said 0)
    "leaf-aki-not-the-intermediates-ski": (Case(inter_extra=((SKI_2, False),),
                                                leaf_extra=((AKI_1, False),)), 20),
    # an email address of the leaf's subject against an email name constraint: tlsprobe
    # said 0 (it judged DNS names and addresses only; the library ignores the subject's)
    "subject-email-outside-permitted": (Case(constraints=PERMIT_EMAIL,
                                             leaf_email="a@other.test"), 47),
    "subject-email-inside-excluded": (Case(constraints=EXCLUDE_EMAIL,
                                           leaf_email="a@other.test"), 48),
    "subject-email-inside-permitted": (Case(constraints=PERMIT_EMAIL,
                                            leaf_email="a@example.test"), 0),
    "leaf-aki-is-the-intermediates-ski": (Case(inter_extra=((SKI_2, False),),
                                               leaf_extra=((AKI_2, False),)), 0),
    # a serial number that is not positive made cryptography warn on stderr (tlsprobe's
    # stderr held a CryptographyDeprecationWarning for each of these)
    "leaf-serial-zero": (Case(leaf_serial=0), 0),
    # OpenSSL accepts these, cryptography's verifier refuses them: tlsprobe said 1
    # (untrusted), now not established (NOT_ESTABLISHED)
    "leading-dot-name-constraint": (Case(host="www.example.test", dns=("www.example.test",),
                                         constraints=PERMIT_BELOW_EXAMPLE), 0),
    "rsa2000-intermediate": (Case(inter_key=_rsa2000), 0),
    "ed25519-intermediate": (Case(inter_key=_ed25519), 0),
}

#: the chains OpenSSL trusts whose verdict tlsprobe cannot establish: cryptography's
#: verifier refuses them and no check of OpenSSL's replicated in tlsprobe does; reported
#: as not established (code null), never as untrusted
NOT_ESTABLISHED = {"leading-dot-name-constraint", "rsa2000-intermediate", "ed25519-intermediate",
                   "root-keyusage-without-basicconstraints", "root-version-1",
                   "leaf-negative-serial"}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_verify_code_is_openssls(tls_server: Callable[..., Any],
                                 run_cli: Callable[..., Any], tmp_path: Path,
                                 name: str) -> None:
    case, expected = CASES[name]
    code, text, ver = served_verdicts(tls_server, run_cli, case, _build(case, tmp_path),
                                      "-cipher", "DEFAULT:@SECLEVEL=0")
    assert code == expected, (name, code, text)
    if name in NOT_ESTABLISHED:
        assert ver["code"] is None and ver["ok"] is False, (name, ver)
        assert ver["message"].startswith("not established: cryptography's verifier refuses"
                                         ), (name, ver)
        return
    assert ver["code"] == code, (name, ver)
    assert ver["message"].startswith(f"{code} ({text})"), (name, ver)
    assert ver["ok"] is (code == 0), ver


@pytest.mark.needs_impl("openssl")
def test_scan_gates_nothing_on_a_verdict_not_established(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """A chain OpenSSL trusts and cryptography's verifier refuses (an RSA-2000 CA key) is
    no `certificate.untrusted` finding in scan, which failed `--fail-on high` (exit 1):
    the trust is not_checked, saying why, with the inconclusive `certificate.not_verified`."""
    case = CASES["rsa2000-intermediate"][0]
    root, leaf, key, inter = _build(case, tmp_path)
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter), "-cipher", "DEFAULT:@SECLEVEL=0"])
    assert _openssl_verdict(srv.port, root, case.host) == (0, "ok")
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "cert", "--json",
                  "--no-progress", "--no-policy", "--cafile", root, "--sni", case.host,
                  "--fail-on", "high")
    report = json.loads(res.stdout.splitlines()[0])
    codes = {f["code"]: f for f in report["findings"]}
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr, codes)
    assert "certificate.untrusted" not in codes, codes
    assert codes["certificate.not_verified"]["inconclusive"] is True, codes
    trust = report["trust"]
    assert trust["status"] == "not_checked" and trust["code"] is None, trust
    assert "RSA key is too weak" in trust["detail"] and trust["hostname_ok"] is True, trust


@pytest.mark.needs_impl("openssl")
def test_scan_of_an_address_the_certificate_lacks_is_a_name_mismatch(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """Code 64 (IP address mismatch) is the finding certificate.hostname_mismatch, as 62
    is (not certificate.untrusted)."""
    case = CASES["address-not-in-the-certificate"][0]
    root, leaf, key, inter = _build(case, tmp_path)
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter)])
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "cert", "--json",
                  "--no-progress", "--no-policy", "--cafile", root)
    report = json.loads(res.stdout.splitlines()[0])
    codes = {f["code"]: f for f in report["findings"]}
    assert report["trust"]["code"] == 64 and report["trust"]["hostname_ok"] is False, report
    assert "certificate.untrusted" not in codes, codes
    assert codes["certificate.hostname_mismatch"]["items"] == ["127.0.0.1"], codes
