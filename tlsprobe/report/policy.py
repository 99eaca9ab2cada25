"""Temporary shim for the merge, removed by the lead: policies and findings moved to
tlsprobe/policy/ (load.py: loading, raising PolicyError; findings.py: evaluation; see
/work/wt/model_imports.txt for the import mapping)."""

from tlsprobe.policy.findings import (
    CHECK_OF_CODE,
    at_or_above,
    builtin_findings,
    dh_modulus_word,
    evaluate,
    findings_for,
)
from tlsprobe.policy.load import (
    ALIASES,
    DEFAULT_POLICY,
    DEFAULT_SEVERITY,
    KEYS,
    VERSION_NAMES,
    Policy,
    PolicyError,
    builtin_names,
    load_policy,
    parse_policy,
)

__all__ = ["ALIASES", "CHECK_OF_CODE", "DEFAULT_POLICY", "DEFAULT_SEVERITY", "KEYS",
           "VERSION_NAMES", "Policy", "PolicyError", "at_or_above", "builtin_findings",
           "builtin_names", "dh_modulus_word", "evaluate", "findings_for", "load_policy",
           "parse_policy"]
