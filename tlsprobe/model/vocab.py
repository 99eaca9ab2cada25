"""The fixed vocabularies of the audit's results, as StrEnums.

Each value is the JSON string the field has always had (a StrEnum is a str: JSON, text and
comparisons with the plain string are unchanged); a reader can match on the members and a
type checker catches a misspelt status. Severities are `model.severity.Severity`; failure
kinds are `errors.FailureKind`.
"""

from __future__ import annotations

from enum import StrEnum


class Order(StrEnum):
    """Who decides among the offered values (suites, groups, signature schemes)."""

    SERVER = "server"        # the server picks by its own preference
    CLIENT = "client"        # the server follows the client's order
    SINGLE = "single"        # one value supported: nothing to order
    UNKNOWN = "unknown"      # not established (see the notes)


class VersionStatus(StrEnum):
    """Whether one protocol version is spoken (`VersionSupport.status`)."""

    SUPPORTED = "supported"
    NOT_SUPPORTED = "not_supported"
    INCONCLUSIVE = "inconclusive"


class DheStatus(StrEnum):
    """How a server negotiates TLS 1.2 finite-field DHE (`DheAudit.status`)."""

    RFC7919 = "rfc7919"          # from supported_groups (RFC 7919)
    FIXED = "fixed"              # one set of parameters whatever the client lists
    NONE = "none"                # every DHE offer refused
    NOT_TESTED = "not_tested"
    INCONCLUSIVE = "inconclusive"


class GroupMethod(StrEnum):
    """How the groups of one version were enumerated (`GroupAudit.method`)."""

    HELLO_RETRY_REQUEST = "hello_retry_request"   # TLS 1.3, offers without key shares
    KEY_SHARE = "key_share"                       # TLS 1.3 with real shares
    SERVER_KEY_EXCHANGE = "server_key_exchange"   # TLS 1.2 ECDHE named curve
    NOT_RUN = "not_run"                           # the version is not spoken or not known


class SigalgStatus(StrEnum):
    """Whether the signature schemes of one version were established."""

    ESTABLISHED = "established"
    NOT_ESTABLISHED = "not_established"
    INCONCLUSIVE = "inconclusive"


class PqCheck(StrEnum):
    """The post-quantum questions (`PqVerdict.check`)."""

    CAPABILITY = "capability"
    HELLO_RETRY_REQUEST = "hello_retry_request"
    BROWSER_LIKE = "browser_like"
    TOLERANCE = "tolerance"


class Answer(StrEnum):
    """The answer to a yes/no question that may not have been asked or settled."""

    YES = "yes"
    NO = "no"
    INCONCLUSIVE = "inconclusive"
    NOT_TESTED = "not_tested"


class TrustStatus(StrEnum):
    """The chain and host name check (`TrustCheck.status`)."""

    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"
    NOT_CHECKED = "not_checked"


class ConsistencyStatus(StrEnum):
    """One configuration throughout the audit? (`ConsistencyCheck.status`)."""

    CONSISTENT = "consistent"
    INCONSISTENT = "inconsistent"
    NOT_CHECKED = "not_checked"


class KxStrength(StrEnum):
    """The strength of the key exchange an accepted suite's connection established
    (`SuiteRow.kx_strength`; the rule is policy/suite_strength.py's, documented in
    docs/CHECKS.md "Key exchange per suite")."""

    OK = "ok"                  # 2048+ bit DH/RSA, 224+ bit EC, a post-quantum group
    WEAK = "weak"              # 1024 to 2047 bit DH/RSA, 160 to 223 bit EC
    INSECURE = "insecure"      # under 1024 bit DH/RSA, under 160 bit EC
    UNKNOWN = "unknown"        # no size established (not recorded, PSK, SRP, ...)


class ReplyKind(StrEnum):
    """What a server did with one hello (probes/audit/confirm.py): answered it, refused it
    (an alert, a close, a reset, silence, or a ServerHello breaking a rule), or unsure (no
    answer that says either)."""

    answered = "answered"
    alert = "alert"
    closed = "closed"
    reset = "reset"
    silent = "silent"
    violation = "violation"
    unsure = "unsure"
