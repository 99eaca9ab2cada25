"""Temporary shim for the merge, removed by the lead: the audit result model moved to
tlsprobe/model/audit.py (see /work/wt/model_imports.txt for the import mapping)."""

from tlsprobe.model.audit import (
    AUDIT_SCHEMA_VERSION,
    ORDER_CLIENT,
    ORDER_SERVER,
    ORDER_SINGLE,
    ORDER_UNKNOWN,
    SEVERITIES,
    AuditReport,
    ConsistencyCheck,
    DheAudit,
    DhParameters,
    Finding,
    GroupAudit,
    PqVerdict,
    SigalgAudit,
    SuiteAudit,
    TrustCheck,
    VersionSupport,
    severity_rank,
)

__all__ = ["AUDIT_SCHEMA_VERSION", "ORDER_CLIENT", "ORDER_SERVER", "ORDER_SINGLE",
           "ORDER_UNKNOWN", "SEVERITIES", "AuditReport", "ConsistencyCheck", "DheAudit",
           "DhParameters", "Finding", "GroupAudit", "PqVerdict", "SigalgAudit", "SuiteAudit",
           "TrustCheck", "VersionSupport", "severity_rank"]
