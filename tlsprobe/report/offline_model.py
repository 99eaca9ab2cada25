"""Temporary shim for the merge, removed by the lead: the capture result model moved to
tlsprobe/model/capture.py (see /work/wt/model_imports.txt for the import mapping)."""

from tlsprobe.model.capture import (
    SCHEMA_VERSION,
    SHAPE_JSON,
    AlertInfo,
    CaptureSummary,
    CertificateInfo,
    Cipher,
    Codepoint,
    ConnectionReport,
    ConnectionTimings,
    Fingerprints,
    KeyExchange,
    Offer,
    capture_encoder,
)

__all__ = ["SCHEMA_VERSION", "SHAPE_JSON", "AlertInfo", "CaptureSummary", "CertificateInfo",
           "Cipher", "Codepoint", "ConnectionReport", "ConnectionTimings", "Fingerprints",
           "KeyExchange", "Offer", "capture_encoder"]
