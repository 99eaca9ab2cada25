"""Temporary shim for the merge, removed by the lead: the probe result model moved to
tlsprobe/model/probe.py (see /work/wt/model_imports.txt for the import mapping)."""

from tlsprobe.model.probe import (
    SCHEMA_VERSION,
    AlertInfo,
    CertificateInfo,
    Cipher,
    Codepoint,
    KeyExchange,
    Offer,
    ProbeResult,
    Timings,
    Verification,
)

__all__ = ["SCHEMA_VERSION", "AlertInfo", "CertificateInfo", "Cipher", "Codepoint",
           "KeyExchange", "Offer", "ProbeResult", "Timings", "Verification"]
