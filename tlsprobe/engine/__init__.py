"""Sans-IO TLS engine: key schedules, PRF, record protection and key logs.

`keyschedule` (TLS 1.3 HKDF schedule and transcript hash), `prf` (TLS 1.0-1.2 PRF, master
secret, key block, Finished), `suites` (per-suite cipher/MAC/PRF parameters), `protection`
(record encryption and decryption for both directions), `keylog` (SSLKEYLOGFILE),
`epochs` (TLS 1.3 traffic-key epochs, shared with offline decryption).
The client state machine builds on these: `client` (ClientHandshake, the one owner of the
handshake state, kept private in `state`; everything outside engine/ uses only the
`interface` module's `Handshake` protocol) with `records` (its record output),
`serverhello`, `extcheck` and `guards` (rules that raise a Refusal), and the version halves `tls12` and `tls13`, which
answer through the narrow interface of `verdict` (HandshakeContext in, Verdict out).
"""

from tlsprobe.engine.keylog import KeyLog, KeyLogWriter, load_keylog, parse_keylog
from tlsprobe.engine.keyschedule import (
    KeySchedule,
    Transcript,
    derive_secret,
    hkdf_expand_label,
    hkdf_extract,
    tls13_export,
    tls13_hash_name,
    traffic_keys,
)
from tlsprobe.engine.prf import (
    KeyBlock,
    extended_master_secret,
    key_block,
    master_secret,
)
from tlsprobe.engine.protection import (
    CbcProtection,
    RecordProtection,
    RecordProtectionError,
    Tls12AeadProtection,
    Tls13Protection,
    protection_for_suite,
    protections_from_key_block,
)
from tlsprobe.engine.suites import SUITES, SuiteParams, suite_params

__all__ = [
    "SUITES",
    "CbcProtection",
    "KeyBlock",
    "KeyLog",
    "KeyLogWriter",
    "KeySchedule",
    "RecordProtection",
    "RecordProtectionError",
    "SuiteParams",
    "Tls12AeadProtection",
    "Tls13Protection",
    "Transcript",
    "derive_secret",
    "extended_master_secret",
    "hkdf_expand_label",
    "hkdf_extract",
    "key_block",
    "load_keylog",
    "master_secret",
    "parse_keylog",
    "protection_for_suite",
    "protections_from_key_block",
    "suite_params",
    "tls13_export",
    "tls13_hash_name",
    "traffic_keys",
]
