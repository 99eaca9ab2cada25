"""Record-protection parameters per cipher suite: which cipher, MAC and PRF hash, and how
much key material each needs. The registry names suites; this table says how to run them.

Lengths follow RFC 5246 section 6.2.3 and the AEAD RFCs: AES-GCM/CCM in TLS 1.2 take a
4-byte implicit salt (fixed_iv_len) and an 8-byte explicit nonce per record (RFC 5288,
6655); ChaCha20-Poly1305 takes a 12-byte IV and no explicit nonce (RFC 7905); CBC suites
have no fixed IV except in TLS 1.0, where the key block yields the first (chained) IV.
Every TLS 1.3 AEAD uses a 12-byte IV.

`protection_params(code)` also covers suites the table does not list: record protection
depends only on the bulk cipher, the MAC and the PRF hash, never on the key exchange, so a
suite the registry describes with a known (cipher, MAC, PRF) gets the same parameters
(fixed ECDH, anonymous, PSK, Camellia, SEED, IDEA, DES and RC4 suites). Export suites
(their own key derivation) and ciphers `cryptography` lacks (ARIA, GOST, Camellia-GCM)
have none; `unsupported_reason` says why, for the pcap reader's notes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tlsprobe import registry

TLS1_0 = 0x0301
TLS1_3 = 0x0304


@dataclass(frozen=True)
class CipherParams:
    """One bulk cipher: key length, TLS 1.2 fixed IV, explicit per-record IV, block, tag."""

    name: str
    key_len: int
    fixed_iv_len: int
    record_iv_len: int
    block_len: int
    tag_len: int
    aead: bool
    stream: bool = False


CIPHERS: dict[str, CipherParams] = {c.name: c for c in (
    CipherParams("AES-128-GCM", 16, 4, 8, 0, 16, True),
    CipherParams("AES-256-GCM", 32, 4, 8, 0, 16, True),
    CipherParams("AES-128-CCM", 16, 4, 8, 0, 16, True),
    CipherParams("AES-256-CCM", 32, 4, 8, 0, 16, True),
    CipherParams("AES-128-CCM-8", 16, 4, 8, 0, 8, True),
    CipherParams("AES-256-CCM-8", 32, 4, 8, 0, 8, True),
    CipherParams("CHACHA20-POLY1305", 32, 12, 0, 0, 16, True),
    CipherParams("AES-128-CBC", 16, 16, 16, 16, 0, False),
    CipherParams("AES-256-CBC", 32, 16, 16, 16, 0, False),
    CipherParams("3DES-EDE-CBC", 24, 8, 8, 8, 0, False),
    CipherParams("CAMELLIA-128-CBC", 16, 16, 16, 16, 0, False),
    CipherParams("CAMELLIA-256-CBC", 32, 16, 16, 16, 0, False),
    CipherParams("SEED-CBC", 16, 16, 16, 16, 0, False),
    CipherParams("IDEA-CBC", 16, 8, 8, 8, 0, False),
    CipherParams("DES-CBC", 8, 8, 8, 8, 0, False),
    CipherParams("RC4-128", 16, 0, 0, 0, 0, False, stream=True),
    CipherParams("NULL", 0, 0, 0, 0, 0, False),
)}

#: HMAC output lengths of the record MACs.
MAC_LEN: dict[str, int] = {"md5": 16, "sha1": 20, "sha256": 32, "sha384": 48}

TLS13_IV_LEN = 12


@dataclass(frozen=True)
class SuiteParams:
    """How to protect records of one cipher suite.

    `iv_len` is the key-block IV length (TLS 1.2 AEAD implicit part; CBC block for TLS 1.0)
    and, for TLS 1.3 suites, the 12-byte traffic IV. `mac` is None for AEAD suites.
    `prf_hash` is the TLS 1.2 PRF hash, or for TLS 1.3 suites the HKDF/transcript hash."""

    code: int
    name: str
    cipher: str
    key_len: int
    iv_len: int
    mac: str | None
    mac_len: int
    aead: bool
    prf_hash: str
    tls13: bool

    @property
    def cipher_params(self) -> CipherParams:
        return CIPHERS[self.cipher]

    def key_material(self, version: int) -> tuple[int, int, int]:
        """(mac_len, key_len, iv_len) to pull from the TLS 1.x key block (or TLS 1.3 keys)."""
        if self.tls13:
            return 0, self.key_len, TLS13_IV_LEN
        if self.aead:
            return 0, self.key_len, self.iv_len
        iv_len = self.cipher_params.block_len if version <= TLS1_0 else 0
        return self.mac_len, self.key_len, iv_len


def _suite(code: int, name: str, cipher: str, mac: str | None, prf_hash: str = "sha256",
           tls13: bool = False) -> SuiteParams:
    c = CIPHERS[cipher]
    iv_len = TLS13_IV_LEN if tls13 else c.fixed_iv_len
    return SuiteParams(code, name, cipher, c.key_len, iv_len, mac,
                       MAC_LEN[mac] if mac else 0, c.aead, prf_hash, tls13)


_G1, _G2 = "AES-128-GCM", "AES-256-GCM"
_C1, _C2, _C18, _C28 = "AES-128-CCM", "AES-256-CCM", "AES-128-CCM-8", "AES-256-CCM-8"
_CH = "CHACHA20-POLY1305"
_B1, _B2, _D3 = "AES-128-CBC", "AES-256-CBC", "3DES-EDE-CBC"

_ROWS: tuple[SuiteParams, ...] = (
    # TLS 1.3 (RFC 8446 appendix B.4)
    _suite(0x1301, "TLS_AES_128_GCM_SHA256", _G1, None, tls13=True),
    _suite(0x1302, "TLS_AES_256_GCM_SHA384", _G2, None, "sha384", tls13=True),
    _suite(0x1303, "TLS_CHACHA20_POLY1305_SHA256", _CH, None, tls13=True),
    _suite(0x1304, "TLS_AES_128_CCM_SHA256", _C1, None, tls13=True),
    _suite(0x1305, "TLS_AES_128_CCM_8_SHA256", _C18, None, tls13=True),
    # AES-GCM (RFC 5288, 5289)
    _suite(0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", _G1, None),
    _suite(0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", _G2, None, "sha384"),
    _suite(0x009E, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", _G1, None),
    _suite(0x009F, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", _G2, None, "sha384"),
    _suite(0x00A2, "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256", _G1, None),
    _suite(0x00A3, "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384", _G2, None, "sha384"),
    _suite(0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", _G1, None),
    _suite(0xC02C, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", _G2, None, "sha384"),
    _suite(0xC02D, "TLS_ECDH_ECDSA_WITH_AES_128_GCM_SHA256", _G1, None),
    _suite(0xC02E, "TLS_ECDH_ECDSA_WITH_AES_256_GCM_SHA384", _G2, None, "sha384"),
    _suite(0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", _G1, None),
    _suite(0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", _G2, None, "sha384"),
    _suite(0xC031, "TLS_ECDH_RSA_WITH_AES_128_GCM_SHA256", _G1, None),
    _suite(0xC032, "TLS_ECDH_RSA_WITH_AES_256_GCM_SHA384", _G2, None, "sha384"),
    # AES-CCM (RFC 6655, 7251)
    _suite(0xC09C, "TLS_RSA_WITH_AES_128_CCM", _C1, None),
    _suite(0xC09D, "TLS_RSA_WITH_AES_256_CCM", _C2, None),
    _suite(0xC09E, "TLS_DHE_RSA_WITH_AES_128_CCM", _C1, None),
    _suite(0xC09F, "TLS_DHE_RSA_WITH_AES_256_CCM", _C2, None),
    _suite(0xC0A0, "TLS_RSA_WITH_AES_128_CCM_8", _C18, None),
    _suite(0xC0A1, "TLS_RSA_WITH_AES_256_CCM_8", _C28, None),
    _suite(0xC0A2, "TLS_DHE_RSA_WITH_AES_128_CCM_8", _C18, None),
    _suite(0xC0A3, "TLS_DHE_RSA_WITH_AES_256_CCM_8", _C28, None),
    _suite(0xC0AC, "TLS_ECDHE_ECDSA_WITH_AES_128_CCM", _C1, None),
    _suite(0xC0AD, "TLS_ECDHE_ECDSA_WITH_AES_256_CCM", _C2, None),
    _suite(0xC0AE, "TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8", _C18, None),
    _suite(0xC0AF, "TLS_ECDHE_ECDSA_WITH_AES_256_CCM_8", _C28, None),
    # ChaCha20-Poly1305 (RFC 7905)
    _suite(0xCCA8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", _CH, None),
    _suite(0xCCA9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", _CH, None),
    _suite(0xCCAA, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", _CH, None),
    # AES-CBC with HMAC (RFC 5246, 4492, 5289)
    _suite(0x002F, "TLS_RSA_WITH_AES_128_CBC_SHA", _B1, "sha1"),
    _suite(0x0035, "TLS_RSA_WITH_AES_256_CBC_SHA", _B2, "sha1"),
    _suite(0x003C, "TLS_RSA_WITH_AES_128_CBC_SHA256", _B1, "sha256"),
    _suite(0x003D, "TLS_RSA_WITH_AES_256_CBC_SHA256", _B2, "sha256"),
    _suite(0x0032, "TLS_DHE_DSS_WITH_AES_128_CBC_SHA", _B1, "sha1"),
    _suite(0x0033, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA", _B1, "sha1"),
    _suite(0x0038, "TLS_DHE_DSS_WITH_AES_256_CBC_SHA", _B2, "sha1"),
    _suite(0x0039, "TLS_DHE_RSA_WITH_AES_256_CBC_SHA", _B2, "sha1"),
    _suite(0x0040, "TLS_DHE_DSS_WITH_AES_128_CBC_SHA256", _B1, "sha256"),
    _suite(0x0067, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", _B1, "sha256"),
    _suite(0x006A, "TLS_DHE_DSS_WITH_AES_256_CBC_SHA256", _B2, "sha256"),
    _suite(0x006B, "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", _B2, "sha256"),
    _suite(0xC009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", _B1, "sha1"),
    _suite(0xC00A, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", _B2, "sha1"),
    _suite(0xC013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", _B1, "sha1"),
    _suite(0xC014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", _B2, "sha1"),
    _suite(0xC023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", _B1, "sha256"),
    _suite(0xC024, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", _B2, "sha384", "sha384"),
    _suite(0xC027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", _B1, "sha256"),
    _suite(0xC028, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", _B2, "sha384", "sha384"),
    # 3DES-EDE-CBC
    _suite(0x000A, "TLS_RSA_WITH_3DES_EDE_CBC_SHA", _D3, "sha1"),
    _suite(0x0013, "TLS_DHE_DSS_WITH_3DES_EDE_CBC_SHA", _D3, "sha1"),
    _suite(0x0016, "TLS_DHE_RSA_WITH_3DES_EDE_CBC_SHA", _D3, "sha1"),
    _suite(0xC008, "TLS_ECDHE_ECDSA_WITH_3DES_EDE_CBC_SHA", _D3, "sha1"),
    _suite(0xC012, "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", _D3, "sha1"),
    # NULL encryption, MAC only (integrity without confidentiality)
    _suite(0x0001, "TLS_RSA_WITH_NULL_MD5", "NULL", "md5"),
    _suite(0x0002, "TLS_RSA_WITH_NULL_SHA", "NULL", "sha1"),
    _suite(0x003B, "TLS_RSA_WITH_NULL_SHA256", "NULL", "sha256"),
    _suite(0xC006, "TLS_ECDHE_ECDSA_WITH_NULL_SHA", "NULL", "sha1"),
    _suite(0xC010, "TLS_ECDHE_RSA_WITH_NULL_SHA", "NULL", "sha1"),
)

SUITES: dict[int, SuiteParams] = {s.code: s for s in _ROWS}


def suite_params(code: int) -> SuiteParams | None:
    """Protection parameters for a cipher suite code, or None when the engine cannot run it."""
    return SUITES.get(code)


#: registry `enc` spelling -> CIPHERS name (the ciphers `cryptography` can run)
_REGISTRY_CIPHER: dict[str, str] = {
    "AES(128)": _B1, "AES(256)": _B2, "AESGCM(128)": _G1, "AESGCM(256)": _G2,
    "AESCCM(128)": _C1, "AESCCM(256)": _C2, "AESCCM8(128)": _C18, "AESCCM8(256)": _C28,
    "ChaCha20(256)": _CH, "3DES(168)": _D3, "Camellia(128)": "CAMELLIA-128-CBC",
    "Camellia(256)": "CAMELLIA-256-CBC", "SEED(128)": "SEED-CBC", "IDEA(128)": "IDEA-CBC",
    "DES(56)": "DES-CBC", "RC4(128)": "RC4-128", "NULL": "NULL",
}
_REGISTRY_MAC: dict[str, str | None] = {"AEAD": None, "MD5": "md5", "SHA1": "sha1",
                                        "SHA256": "sha256", "SHA384": "sha384"}
_REGISTRY_PRF = {"SHA256": "sha256", "SHA384": "sha384"}


def _registry_params(code: int) -> SuiteParams | None:
    suite = registry.cipher_suite(code)
    if suite is None or not suite.iana or suite.export or suite.kx in ("TLS13", "SCSV"):
        return None
    cipher = _REGISTRY_CIPHER.get(suite.enc)
    mac = _REGISTRY_MAC.get(suite.mac, "")
    prf_hash = _REGISTRY_PRF.get(suite.prf_hash or "SHA256")
    if cipher is None or mac == "" or prf_hash is None or (mac is None) != CIPHERS[cipher].aead:
        return None
    return _suite(code, suite.name, cipher, mac, prf_hash)


def protection_params(code: int) -> SuiteParams | None:
    """Protection parameters of any TLS 1.0-1.3 suite whose bulk cipher, MAC and PRF the
    engine can run: the table's row, else one derived from the registry's description
    (record protection does not depend on the key exchange or authentication)."""
    known = SUITES.get(code)
    if known is not None:
        return known
    derived = _registry_params(code)
    return replace(derived, code=code) if derived is not None else None


def unsupported_reason(code: int) -> str:
    """Why `protection_params(code)` is None, in a few words ("RC2: not in cryptography")."""
    suite = registry.cipher_suite(code)
    if suite is None:
        return "unknown suite"
    if suite.export:
        return "export key derivation: not supported"
    if suite.enc == "NULL" and suite.mac == "NULL":
        return "no protection negotiated"
    if suite.enc not in _REGISTRY_CIPHER:
        return f"{suite.cipher}: not in cryptography"
    if suite.mac not in _REGISTRY_MAC:
        return f"{suite.mac} MAC: not supported"
    if not suite.iana:
        return "non-standard suite: not supported"
    return "not supported"
