"""Fixed vocabularies are StrEnums whose values are the JSON strings (#31).

Every result field that holds one word out of a fixed set (a status, a verdict, an order, a
method, a stop condition, an error kind, a severity) is typed with its StrEnum, so that a
reader matches on members and mypy catches a misspelling; the JSON shows the same strings
as before."""
from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import pkgutil
import types
import typing

import tlsprobe.model
from tlsprobe.errors import FailureKind
from tlsprobe.model.audit import AuditReport, GroupAudit, PqVerdict, TrustCheck, VersionSupport
from tlsprobe.model.probe import Codepoint
from tlsprobe.model.vocab import Answer, GroupMethod, Order, PqCheck, TrustStatus, VersionStatus
from tlsprobe.probes.audit import outcome

#: field names that always hold a word of a fixed vocabulary
VOCABULARY_FIELDS = {"status", "verdict", "order", "method", "error_kind", "check", "stop",
                     "severity"}
#: (class, field) that carry such a name but hold prose: a sentence for people
PROSE = {("Ranking", "verdict"), ("Ranking", "order"),   # order: the entries' labels
         # what the peer sent, as sent: an HTTP status line, an OCSP status; a number
         ("HstsDetails", "status"), ("HttpCompressionDetails", "status"),
         ("BannerDetails", "status"), ("StaplingDetails", "status"),
         ("RedirectHop", "status"), ("SecurityHeadersDetails", "status"),
         ("CookiesDetails", "status"), ("ClockSkewDetails", "status"),
         ("BannersDetails", "status"), ("CompressionDetails", "method")}



def _classes() -> list[type]:
    mods = [importlib.import_module(f"tlsprobe.model.{m.name}")
            for m in pkgutil.iter_modules(tlsprobe.model.__path__)]
    mods.append(outcome)
    found = []
    for mod in mods:
        for obj in vars(mod).values():
            if (isinstance(obj, type) and dataclasses.is_dataclass(obj)
                    and obj.__module__ == mod.__name__):
                found.append(obj)
    return found


def _is_enum(tp: object) -> bool:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return len(args) == 1 and _is_enum(args[0])
    return isinstance(tp, type) and issubclass(tp, enum.StrEnum)


def test_every_vocabulary_field_of_the_results_is_a_strenum():
    untyped = []
    for cls in _classes():
        namespace = vars(importlib.import_module(cls.__module__))
        for f in dataclasses.fields(cls):
            if f.name not in VOCABULARY_FIELDS or (cls.__name__, f.name) in PROSE:
                continue
            tp = eval(f.type, namespace) if isinstance(f.type, str) else f.type
            if not _is_enum(tp):
                untyped.append(f"{cls.__module__}.{cls.__name__}.{f.name}: {f.type}")
    assert not untyped, "vocabulary fields typed as plain strings:\n" + "\n".join(untyped)


def test_the_json_strings_are_the_enum_values_as_before():
    v13 = Codepoint.version(0x0304)
    typed = AuditReport(
        host="h", port=1, versions=(VersionSupport(v13, VersionStatus.SUPPORTED),),
        groups=(GroupAudit(v13, True, GroupMethod.HELLO_RETRY_REQUEST, order=Order.SERVER),),
        post_quantum=(PqVerdict(PqCheck.BROWSER_LIKE, "x", Answer.NOT_TESTED),),
        trust=TrustCheck(TrustStatus.NOT_CHECKED), error_kind=FailureKind.NOT_TLS)
    plain = AuditReport(
        host="h", port=1, versions=(VersionSupport(v13, "supported"),),  # type: ignore[arg-type]
        groups=(GroupAudit(v13, True, "hello_retry_request", order="server"),),  # type: ignore[arg-type]
        post_quantum=(PqVerdict("browser_like", "x", "not_tested"),),  # type: ignore[arg-type]
        trust=TrustCheck("not_checked"), error_kind="not_tls")  # type: ignore[arg-type]
    assert typed.to_json() == plain.to_json()
    doc = json.loads(typed.to_json())
    assert doc["versions"][0]["status"] == "supported"
    assert doc["groups"][0]["method"] == "hello_retry_request"
    assert doc["groups"][0]["order"] == "server"
    assert doc["post_quantum"][0] == {"check": "browser_like", "subject": "x",
                                      "verdict": "not_tested", "detail": ""}
    assert doc["error_kind"] == "not_tls"


def test_outcome_and_job_vocabularies_keep_their_strings():
    assert [s.value for s in outcome.OutcomeStatus] == [
        "hello_retry_request", "server_hello", "alert", "closed", "inconclusive"]
    assert [s.value for s in outcome.Stop] == ["hello", "flight", "verify"]
    assert outcome.STOP_FLIGHT is outcome.Stop.FLIGHT
    assert outcome.Outcome(outcome.ALERT).refused
