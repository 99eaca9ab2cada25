"""Client and server hello fingerprints: JA3, JA3S (Salesforce, BSD-3-Clause) and JA4
(FoxIO, BSD-3-Clause). The rest of the JA4+ family (JA4S, JA4X, JA4H, ...) is under the FoxIO
License and deliberately not implemented.

JA3 = md5("SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats"), values
in decimal joined by "-", GREASE values left out, as tshark's tls.handshake.ja3 computes it.
JA3S = md5("SSLVersion,Cipher,Extensions").

JA4 = a_b_c (FoxIO JA4.md): a = protocol (t TCP, q QUIC, d DTLS), version (highest
non-GREASE supported_versions entry, else legacy_version: 13, 12, 11, 10, s3, s2, d1..d3,
00), d/i (SNI extension present or not), the number of cipher suites and of extensions
(GREASE left out, two digits, at most 99), and the first and last characters of the first
ALPN value (its first and last hex digits when either is not an ASCII letter or digit,
"00" without ALPN); b = the first 12 hex digits of sha256 over the sorted cipher suites in
4-digit hex joined by ","; c = the same over the sorted extensions without SNI (0000) and
ALPN (0010), then "_" and the signature algorithms in wire order (no "_" part when there
are none). Empty lists hash to "000000000000". `ja4_r` is the unhashed form.

Not memoised here: offline.build derives them once per handshake shape of an analysis.
"""

from __future__ import annotations

import hashlib
from typing import Final

from tlsprobe.wire.hello_fields import ClientHelloInfo, ServerHelloInfo

GREASE: Final = frozenset(0x0A0A + 0x1010 * i for i in range(16))
_VERSIONS: Final = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10", 0x0300: "s3",
                    0x0002: "s2", 0xFEFF: "d1", 0xFEFD: "d2", 0xFEFC: "d3"}
_TRANSPORT: Final = {"tcp": "t", "quic": "q", "dtls": "d"}
_ALNUM: Final = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
#: the 4-digit hex text of each 16-bit code met so far (at most 65,536 entries): compiled,
#: a format spec is parsed per use (about 2,700 instructions, some 40 a JA4), a lookup is not
_HEX4: Final[dict[int, str]] = {}


def _dash(values: tuple[int, ...] | list[int]) -> str:
    return "-".join(str(v) for v in values if v not in GREASE)


def ja3(hello: ClientHelloInfo) -> tuple[str, str]:
    """(md5 hex, the string hashed)."""
    return _ja3(hello.legacy_version, hello.cipher_suites, hello.extensions,
                hello.supported_groups, hello.ec_point_formats)


def _ja3(version: int, suites: tuple[int, ...], extensions: tuple[int, ...],
         groups: tuple[int, ...], formats: tuple[int, ...]) -> tuple[str, str]:
    full = ",".join((str(version), _dash(suites), _dash(extensions), _dash(groups),
                     "-".join(str(v) for v in formats)))
    return hashlib.md5(full.encode()).hexdigest(), full


def ja3s(hello: ServerHelloInfo) -> tuple[str, str]:
    return _ja3s(hello.legacy_version, hello.cipher_suite, hello.extensions)


def _ja3s(version: int, suite: int, extensions: tuple[int, ...]) -> tuple[str, str]:
    full = ",".join((str(version), str(suite), _dash(extensions)))
    return hashlib.md5(full.encode()).hexdigest(), full


def _h12(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12] if text else "000000000000"


def alpn_chars(alpn: bytes | None) -> str:
    """JA4's two ALPN characters."""
    if not alpn:
        return "00"
    first, last = alpn[0], alpn[-1]
    if first in _ALNUM and last in _ALNUM:
        return chr(first) + chr(last)
    digits = alpn.hex()
    return digits[0] + digits[-1]


def _hex4(code: int) -> str:
    """f"{code:04x}", remembered for 16-bit codes (the table stays bounded whatever a
    capture holds)."""
    text = _HEX4.get(code)
    if text is None:
        text = f"{code:04x}"
        if 0 <= code <= 0xFFFF:
            _HEX4[code] = text
    return text


def ja4(hello: ClientHelloInfo, transport: str = "tcp") -> tuple[str, str]:
    """(ja4, ja4_r) of a ClientHello; `transport` is "tcp", "quic" or "dtls"."""
    return _ja4(transport, hello.legacy_version, hello.cipher_suites, hello.extensions,
                hello.supported_versions, hello.alpn[0] if hello.alpn else None,
                hello.signature_algorithms)


def _ja4(transport: str, legacy_version: int, cipher_suites: tuple[int, ...],
         extensions: tuple[int, ...], supported_versions: tuple[int, ...],
         alpn: bytes | None, signature_algorithms: tuple[int, ...]) -> tuple[str, str]:
    exts = [e for e in extensions if e not in GREASE]
    suites = [_hex4(c) for c in cipher_suites if c not in GREASE]
    versions = [v for v in supported_versions if v not in GREASE]
    version = max(versions) if 43 in exts and versions else legacy_version
    a = (f"{_TRANSPORT.get(transport, 't')}{_VERSIONS.get(version, '00')}"
         f"{'d' if 0 in exts else 'i'}{min(99, len(suites)):02d}{min(99, len(exts)):02d}"
         f"{alpn_chars(alpn)}")
    b_raw = ",".join(sorted(suites))
    ext_sorted = sorted(_hex4(e) for e in exts if e not in (0, 16))
    sigs = [_hex4(s) for s in signature_algorithms if s not in GREASE]
    c_raw = ",".join(ext_sorted) + ("_" + ",".join(sigs) if sigs else "")
    c = _h12(c_raw) if ext_sorted else "000000000000"
    return f"{a}_{_h12(b_raw)}_{c}", f"{a}_{b_raw}_{c_raw}"
