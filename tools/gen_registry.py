#!/usr/bin/env python3
"""Generate tlsprobe/registry/_generated.py from the IANA TLS registries.

Inputs (see ../shared/iana/README.md): tls-cipher-suites.csv, tls-supported-groups.csv,
tls-signature-schemes.csv and testssl.sh's openssl-cipher-mapping.txt. Output: plain tuples,
sorted by code, so the module is byte-for-byte reproducible and reviewable in a diff.

Usage: python tools/gen_registry.py [IANA_DIR] [-o OUTPUT]
(IANA_DIR defaults to ../shared/iana relative to the repository root.)
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_IANA = REPO_ROOT.parent / "shared" / "iana"
DEFAULT_OUTPUT = REPO_ROOT / "tlsprobe" / "registry" / "_generated.py"
INPUTS = ("tls-cipher-suites.csv", "tls-supported-groups.csv", "tls-signature-schemes.csv",
          "openssl-cipher-mapping.txt")

SSL3, TLS10, TLS11, TLS12, TLS13 = 0x0300, 0x0301, 0x0302, 0x0303, 0x0304
PROTOCOL_VERSIONS = {"SSLv3": (SSL3, TLS10, TLS11, TLS12), "TLSv1": (TLS10, TLS11, TLS12),
                     "TLSv1.2": (TLS12,), "TLSv1.3": (TLS13,)}

# TLS 1.3 suites (RFC 8446, RFC 8998 SM4, RFC 9150 integrity-only, RFC 9367 GOST, AEGIS draft).
TLS13_SUITES = {0x1301, 0x1302, 0x1303, 0x1304, 0x1305, 0x1306, 0x1307, 0x00C6, 0x00C7,
                0xC0B4, 0xC0B5, 0xC103, 0xC104, 0xC105, 0xC106}
SCSV_SUITES = {0x00FF, 0x5600}

# key-exchange part of "TLS_<kx>_WITH_..." -> (kx, auth, export). Anonymous DH/ECDH send an
# ephemeral ServerKeyExchange, so they are DHE/ECDHE with auth "anon".
KX_PARTS = {
    "NULL": ("NULL", "NULL", False), "RSA": ("RSA", "RSA", False),
    "RSA_EXPORT": ("RSA", "RSA", True), "RSA_EXPORT1024": ("RSA", "RSA", True),
    "RSA_FIPS": ("RSA", "RSA", False),
    "DH_DSS": ("DH", "DH", False), "DH_RSA": ("DH", "DH", False),
    "DH_DSS_EXPORT": ("DH", "DH", True), "DH_RSA_EXPORT": ("DH", "DH", True),
    "DHE_DSS": ("DHE", "DSS", False), "DHE_RSA": ("DHE", "RSA", False),
    "DHE_DSS_EXPORT": ("DHE", "DSS", True), "DHE_RSA_EXPORT": ("DHE", "RSA", True),
    "DHE_DSS_EXPORT1024": ("DHE", "DSS", True),
    "DH_anon": ("DHE", "anon", False), "DH_anon_EXPORT": ("DHE", "anon", True),
    "ECDH_ECDSA": ("ECDH", "ECDH", False), "ECDH_RSA": ("ECDH", "ECDH", False),
    "ECDHE_ECDSA": ("ECDHE", "ECDSA", False), "ECDHE_RSA": ("ECDHE", "RSA", False),
    "ECDH_anon": ("ECDHE", "anon", False),
    "PSK": ("PSK", "PSK", False), "DHE_PSK": ("DHE_PSK", "PSK", False),
    "PSK_DHE": ("DHE_PSK", "PSK", False), "ECDHE_PSK": ("ECDHE_PSK", "PSK", False),
    "RSA_PSK": ("RSA_PSK", "RSA", False),
    "SRP_SHA": ("SRP", "SRP", False), "SRP_SHA_RSA": ("SRP", "RSA", False),
    "SRP_SHA_DSS": ("SRP", "DSS", False),
    "KRB5": ("KRB5", "KRB5", False), "KRB5_EXPORT": ("KRB5", "KRB5", True),
    "ECCPWD": ("ECCPWD", "ECCPWD", False), "GOSTR341112_256": ("GOST", "GOST", False),
    "CECPQ1_RSA": ("CECPQ1", "RSA", False), "CECPQ1_ECDSA": ("CECPQ1", "ECDSA", False),
}

# bulk cipher token -> OpenSSL-style "Enc" (as in openssl ciphers -v), with key bits.
CIPHERS = {
    "NULL": "NULL", "RC4_128": "RC4(128)", "RC4_40": "RC4(40)", "RC4_56": "RC4(56)",
    "RC2_CBC_40": "RC2(40)", "RC2_56": "RC2(56)", "IDEA_CBC": "IDEA(128)",
    "DES40_CBC": "DES(40)", "DES_CBC_40": "DES(40)", "DES_CBC": "DES(56)",
    "3DES_EDE_CBC": "3DES(168)", "SEED_CBC": "SEED(128)",
    "CHACHA20_POLY1305": "ChaCha20(256)", "SM4_GCM": "SM4GCM(128)", "SM4_CCM": "SM4CCM(128)",
    "AEGIS_256": "AEGIS256(256)", "AEGIS_128L": "AEGIS128L(128)",
    "28147_CNT": "GOST(256)", "KUZNYECHIK_CTR": "Kuznyechik(256)",
    "MAGMA_CTR": "Magma(256)", "KUZNYECHIK_MGM_L": "KuznyechikMGM(256)",
    "KUZNYECHIK_MGM_S": "KuznyechikMGM(256)", "MAGMA_MGM_L": "MagmaMGM(256)",
    "MAGMA_MGM_S": "MagmaMGM(256)",
}
for _bits in (128, 256):
    CIPHERS.update({
        f"AES_{_bits}_CBC": f"AES({_bits})", f"AES_{_bits}_GCM": f"AESGCM({_bits})",
        f"AES_{_bits}_CCM": f"AESCCM({_bits})", f"AES_{_bits}_CCM_8": f"AESCCM8({_bits})",
        f"CAMELLIA_{_bits}_CBC": f"Camellia({_bits})",
        f"CAMELLIA_{_bits}_GCM": f"CamelliaGCM({_bits})",
        f"ARIA_{_bits}_CBC": f"ARIA({_bits})", f"ARIA_{_bits}_GCM": f"ARIAGCM({_bits})",
    })
AEAD_MARKERS = ("GCM", "CCM", "ChaCha20", "AEGIS", "MGM")
MAC_SUFFIXES = {"SHA384": "SHA384", "SHA256": "SHA256", "SHA": "SHA1", "MD5": "MD5",
                "NULL": "NULL", "IMIT": "GOST89IMIT", "OMAC": "OMAC", "SM3": "SM3"}

# Normalisation of the mapping's Kx/Au columns, for suites whose name we cannot parse.
MAP_KX = {"ECDH": "ECDHE", "DH": "DHE", "DHEPSK": "DHE_PSK", "ECDHEPSK": "ECDHE_PSK",
          "RSAPSK": "RSA_PSK", "None": "NULL", "any": "TLS13", "DH/DSS": "DH", "DH/RSA": "DH",
          "ECDH/ECDSA": "ECDH", "ECDH/RSA": "ECDH"}
MAP_AU = {"None": "anon", "any": "TLS13", "GOST01": "GOST", "GOST94": "GOST"}

GROUP_VERSIONS_TLS12_ONLY_EC = {23, 24, 25}  # secp256r1/384r1/521r1 are also TLS 1.3 groups
HYBRID_GROUPS = {0x11EB, 0x11EC, 0x11ED, 0x11EE}
# Codepoints registered after the CSV copy was taken (added by hand; keep the note).
EXTRA_GROUPS = [
    # 0x11ee: curveSM2MLKEM768, draft-ietf-tls-ecdhe-mlkem; offered by testssl.sh 3.3.
    (0x11EE, "curveSM2MLKEM768", None, False),
]
GROUP_ALIASES = {
    "secp192r1": ("P-192", "prime192v1"), "secp224r1": ("P-224",),
    "secp256r1": ("P-256", "prime256v1", "nistp256"), "secp384r1": ("P-384", "nistp384"),
    "secp521r1": ("P-521", "nistp521"), "x25519": ("X25519", "curve25519"),
    "x448": ("X448", "curve448"), "sect163k1": ("K-163",), "sect163r2": ("B-163",),
    "sect233k1": ("K-233",), "sect233r1": ("B-233",), "sect283k1": ("K-283",),
    "sect283r1": ("B-283",), "sect409k1": ("K-409",), "sect409r1": ("B-409",),
    "sect571k1": ("K-571",), "sect571r1": ("B-571",), "curveSM2": ("SM2",),
    "MLKEM512": ("ML-KEM-512",), "MLKEM768": ("ML-KEM-768",), "MLKEM1024": ("ML-KEM-1024",),
    "X25519Kyber768Draft00": ("X25519Kyber768", "x25519_kyber768"),
    "SecP256r1Kyber768Draft00": ("P256Kyber768Draft00", "p256_kyber768"),
}
# TLS 1.2 (hash, signature) pairs that the TLS 1.3 registry lists only as "Reserved for
# backward compatibility" (RFC 5246 7.4.1.4.1); named so TLS 1.2 traces stay readable.
LEGACY_SIGSCHEMES = [
    (0x0101, "rsa_pkcs1_md5"), (0x0102, "dsa_md5"), (0x0103, "ecdsa_md5"),
    (0x0202, "dsa_sha1"), (0x0301, "rsa_pkcs1_sha224"), (0x0302, "dsa_sha224"),
    (0x0303, "ecdsa_sha224"), (0x0402, "dsa_sha256"), (0x0502, "dsa_sha384"),
    (0x0602, "dsa_sha512"),
]


def read_csv(path: Path) -> list[list[str]]:
    """CSV rows without the header; the csv module handles quoted multi-line descriptions."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[1:]


def parse_suite_value(value: str) -> int | None:
    """'0x13,0x01' -> 0x1301; ranges ('0x00,0x1C-1D', '0x01-09,*') -> None."""
    m = re.fullmatch(r"0x([0-9A-Fa-f]{2}),0x([0-9A-Fa-f]{2})", value.strip())
    return int(m.group(1) + m.group(2), 16) if m else None


def is_placeholder(description: str) -> bool:
    d = description.strip()
    return d.startswith(("Unassigned", "Reserved"))


SuiteFields = tuple[str, str, str, str, bool, "str | None"]  # kx, auth, enc, mac, export, prf


def split_iana_name(name: str) -> SuiteFields | None:
    """Decompose an IANA-style suite name into (kx, auth, enc, mac) plus export and PRF hash."""
    body = re.sub(r"^(TLS|SSL)_", "", name)
    body = re.sub(r"_OLD$", "", body)
    if "_WITH_" in body:
        kx_part, rest = body.split("_WITH_", 1)
        if kx_part not in KX_PARTS:
            return None
        kx, auth, export = KX_PARTS[kx_part]
    else:
        kx, auth, export, rest = "TLS13", "TLS13", False, body
    cipher, mac_token = rest, ""
    for suffix in MAC_SUFFIXES:
        if rest.endswith("_" + suffix) and rest[: -len(suffix) - 1] in CIPHERS:
            cipher, mac_token = rest[: -len(suffix) - 1], suffix
            break
    if cipher == "SHA256" or cipher == "SHA384":  # RFC 9150 integrity-only TLS 1.3 suites
        return kx, auth, "NULL", cipher, export, cipher
    if cipher not in CIPHERS:
        return None
    enc = CIPHERS[cipher]
    aead = any(marker in enc for marker in AEAD_MARKERS)
    mac = "AEAD" if aead else MAC_SUFFIXES.get(mac_token, "AEAD")
    if kx == "GOST":
        prf = "STREEBOG256"
    elif mac_token == "SM3":
        prf = "SM3"
    elif mac_token == "SHA384":
        prf = "SHA384"
    else:
        prf = "SHA256"
    return kx, auth, enc, mac, export, prf


def read_mapping(path: Path) -> dict[int, list[str]]:
    """testssl.sh mapping: 2-byte codes only (SSLv2 3-byte codes go to sslv2)."""
    rows: dict[int, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) < 9 or parts[1] != "-":
            continue
        code = parse_suite_value(parts[0])
        if code is not None:
            rows.setdefault(code, parts)
    return rows


def read_sslv2(path: Path) -> list[tuple[int, str, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        m = re.fullmatch(r"0x(..),0x(..),0x(..)", parts[0]) if parts else None
        if m and len(parts) >= 9:
            out.append((int("".join(m.groups()), 16), parts[3], parts[2]))
    return sorted(out)


def from_mapping(parts: list[str]) -> SuiteFields:
    """Normalise the mapping's Kx/Au/Enc/Mac columns (used when the name is unparseable)."""
    cols = {p.split("=", 1)[0]: p.split("=", 1)[1] for p in parts if "=" in p}
    kx_raw = re.sub(r"\(\d+\)$", "", cols["Kx"])
    kx = MAP_KX.get(kx_raw, kx_raw)
    auth = MAP_AU.get(cols["Au"], cols["Au"])
    if kx == "NULL":
        auth = "NULL"
    enc = "NULL" if cols["Enc"] == "None" else cols["Enc"]
    mac = "NULL" if cols["Mac"] == "Null" else cols["Mac"]
    return kx, auth, enc, mac, parts[-1] == "export", None if kx == "GOST" else "SHA256"


def suite_versions(code: int, mapping_row: list[str] | None, mac: str, name: str
                   ) -> tuple[int, ...]:
    """Protocol versions a suite may be negotiated in.

    The mapping's protocol column is OpenSSL's minimum version (SSLv3 / TLSv1 / TLSv1.2) and
    wins where present: the RFC 5487 PSK CBC-SHA256/SHA384 suites, for one, are TLSv1 there
    because they may be used with TLS 1.0/1.1. Otherwise AEAD and SHA-2 suites are TLS 1.2.
    """
    if code in TLS13_SUITES:
        return (TLS13,)
    if code in SCSV_SUITES:
        return (SSL3, TLS10, TLS11, TLS12)
    if mapping_row is not None and mapping_row[4] in PROTOCOL_VERSIONS:
        return PROTOCOL_VERSIONS[mapping_row[4]]
    if mac == "AEAD" or name.endswith(("_SHA256", "_SHA384")) or "GOSTR341112" in name:
        # RFC 9189 GOST suites are defined for TLS 1.2 only
        return (TLS12,)
    return (TLS10, TLS11, TLS12)


def build_suites(iana_dir: Path) -> list[tuple]:
    mapping = read_mapping(iana_dir / "openssl-cipher-mapping.txt")
    entries: dict[int, tuple[str, bool]] = {}
    for row in read_csv(iana_dir / "tls-cipher-suites.csv"):
        code = parse_suite_value(row[0])
        if code is None or is_placeholder(row[1]):
            continue
        entries[code] = (row[1].strip(), True)
    for code, parts in mapping.items():
        if code not in entries:  # pre-standard / vendor suites known only to the mapping
            name = parts[3] if parts[3] != "-" else "OPENSSL_" + parts[2].replace("-", "_")
            entries[code] = (name, False)
    rows = []
    for code in sorted(entries):
        name, iana = entries[code]
        mrow = mapping.get(code)
        openssl = mrow[2] if mrow is not None and mrow[2] != "-" else None
        fields: SuiteFields | None
        if code in SCSV_SUITES:
            fields = ("SCSV", "SCSV", "NULL", "NULL", False, None)
        elif code == 0x0000:
            fields = ("NULL", "NULL", "NULL", "NULL", False, None)
        else:
            parsed = split_iana_name(name)
            if parsed is None and mrow is not None:
                parsed = from_mapping(mrow)
            if parsed is None:
                raise SystemExit(f"gen_registry: cannot classify suite 0x{code:04x} {name}")
            fields = parsed
        kx, auth, enc, mac, export, prf = fields
        if code in TLS13_SUITES:  # e.g. RFC 9367 GOST names contain _WITH_ but are TLS 1.3
            kx, auth = "TLS13", "TLS13"
        if mrow is not None and mrow[-1] == "export":
            export = True
        versions = suite_versions(code, mrow, mac, name)
        rows.append((code, name, openssl, kx, auth, enc, mac, versions, iana, export, prf))
    return rows


def group_kind(code: int, name: str) -> str:
    if code in HYBRID_GROUPS:
        return "hybrid"
    if "Kyber" in name:
        return "draft"
    if name.startswith("MLKEM"):
        return "mlkem"
    if name.startswith("ffdhe"):
        return "ffdhe"
    if name in ("x25519", "x448"):
        return "ecx"
    if name.startswith("GC"):
        return "gost"
    if name.startswith(("sec", "brainpool", "curveSM2")):
        return "ec"
    return "other"


def group_versions(code: int, name: str, kind: str) -> tuple[bool, bool]:
    """(usable in TLS <= 1.2, usable in TLS 1.3)."""
    if kind in ("mlkem", "hybrid", "draft") or name == "curveSM2" or name.endswith("tls13"):
        return False, True
    if kind == "ec" and code not in GROUP_VERSIONS_TLS12_ONLY_EC:
        return True, False  # sect*, other secp*, brainpool 0x1a-0x1c: not TLS 1.3 groups
    if kind == "other":
        return True, False  # arbitrary_explicit_*_curves
    return True, True


def build_groups(iana_dir: Path) -> list[tuple]:
    raw: dict[int, tuple[str, bool | None, bool, bool]] = {}
    for row in read_csv(iana_dir / "tls-supported-groups.csv"):
        if not row[0].strip().isdigit() or is_placeholder(row[1]):
            continue
        name = row[1].replace("(OBSOLETE)", "").strip()
        dtls = {"Y": True, "N": False}.get(row[2].strip())
        raw[int(row[0])] = (name, dtls, row[3].strip() == "Y", True)
    for code, name, dtls, recommended in EXTRA_GROUPS:
        raw.setdefault(code, (name, dtls, recommended, False))
    rows = []
    for code in sorted(raw):
        name, dtls, recommended, iana = raw[code]
        kind = group_kind(code, name)
        tls12, tls13 = group_versions(code, name, kind)
        aliases = GROUP_ALIASES.get(name, ())
        rows.append((code, name, kind, tls12, tls13, recommended, aliases, dtls, iana))
    return rows


def build_sigschemes(iana_dir: Path) -> list[tuple]:
    raw: dict[int, tuple[str, bool, bool]] = {}
    for row in read_csv(iana_dir / "tls-signature-schemes.csv"):
        if not re.fullmatch(r"0x[0-9A-Fa-f]{4}", row[0].strip()) or is_placeholder(row[1]):
            continue
        raw[int(row[0], 16)] = (row[1].strip(), row[2].strip() == "Y", True)
    for code, name in LEGACY_SIGSCHEMES:
        raw.setdefault(code, (name, False, False))
    return [(code, *raw[code]) for code in sorted(raw)]


def render(iana_dir: Path) -> str:
    digests = "\n".join(
        f"#   {n}  sha256:{hashlib.sha256((iana_dir / n).read_bytes()).hexdigest()[:16]}"
        for n in INPUTS)
    out = [
        '"""IANA TLS registry data, GENERATED by tools/gen_registry.py -- do not edit.',
        "",
        "Regenerate with:  python tools/gen_registry.py [IANA_DIR]   (default ../shared/iana)",
        "Rows are plain tuples; tlsprobe.registry wraps them in dataclasses.",
        '"""',
        "# Inputs:",
        digests,
        "# fmt: off",
        "from __future__ import annotations",
        "",
        "# (code, name, openssl_name, kx, auth, enc, mac, versions, iana, export, prf_hash)",
        ("CIPHER_SUITES: tuple[tuple[int, str, str | None, str, str, str, str, tuple[int, ...],"
         " bool, bool, str | None], ...] = ("),
    ]
    for r in build_suites(iana_dir):
        vers = "(" + ", ".join(f"0x{v:04x}" for v in r[7]) + ("," if len(r[7]) == 1 else "") + ")"
        out.append(f"    (0x{r[0]:04x}, {r[1]!r}, {r[2]!r}, {r[3]!r}, {r[4]!r}, {r[5]!r}, "
                   f"{r[6]!r}, {vers}, {r[8]!r}, {r[9]!r}, {r[10]!r}),")
    out += [")", "",
            "# (code, name, kind, tls12, tls13, recommended, aliases, dtls_ok, iana)",
            ("GROUPS: tuple[tuple[int, str, str, bool, bool, bool, tuple[str, ...], bool | None,"
             " bool], ...] = (")]
    for r in build_groups(iana_dir):
        out.append(f"    (0x{r[0]:04x}, {r[1]!r}, {r[2]!r}, {r[3]!r}, {r[4]!r}, {r[5]!r}, "
                   f"{r[6]!r}, {r[7]!r}, {r[8]!r}),")
    out += [")", "", "# (code, name, recommended, iana)",
            "SIGNATURE_SCHEMES: tuple[tuple[int, str, bool, bool], ...] = ("]
    for r in build_sigschemes(iana_dir):
        out.append(f"    (0x{r[0]:04x}, {r[1]!r}, {r[2]!r}, {r[3]!r}),")
    out += [")", "", "# SSLv2 CIPHER-SPECs (3-byte codes): (code, name, openssl_name)",
            "SSLV2_CIPHERS: tuple[tuple[int, str, str], ...] = ("]
    for code, name, openssl in read_sslv2(iana_dir / "openssl-cipher-mapping.txt"):
        out.append(f"    (0x{code:06x}, {name!r}, {openssl!r}),")
    out += [")", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("iana_dir", nargs="?", type=Path, default=DEFAULT_IANA)
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    args = ap.parse_args(argv)
    missing = [n for n in INPUTS if not (args.iana_dir / n).is_file()]
    if missing:
        print(f"gen_registry: missing {', '.join(missing)} in {args.iana_dir}", file=sys.stderr)
        return 2
    args.output.write_text(render(args.iana_dir), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
