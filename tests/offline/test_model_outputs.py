"""The report model's fast paths give exactly what the plain ones give: the JSON text of
`to_json` is `json.dumps(to_dict())`, reports built from the shape cache equal freshly
built ones, and the statistics and filters read the reports right."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.helpers.own_captures import CAPTURES
from tlsprobe.offline import build
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
from tlsprobe.report.trace import TraceFormatter
from tlsprobe.offline.filters import ConnectionFilter, parse_version
from tlsprobe.offline.stats import Statistics
from tlsprobe.model.capture import BriefReport, ConnectionReport, ReportText, capture_encoder
from tlsprobe.report.offline_tables import connection_row

ALL = sorted(p.name for p in CAPTURES.glob("*.pcap"))


def reports(name: str, **options: object) -> list[ConnectionReport]:
    return [r for r, _ in CaptureAnalysis(str(CAPTURES / name), AnalyzerOptions(
        **options, trace_formatter=TraceFormatter if options.get("trace") else None))]


@pytest.mark.parametrize("name", ALL)
def test_json_text_is_json_dumps_of_the_dict(name: str) -> None:
    encoder = capture_encoder()  # one per run, shared by the run's reports (as pcap does)
    for r in reports(name) + reports(name, trace=True):
        assert r.to_json() == json.dumps(r.to_dict())
        assert r.to_json(encoder=encoder) == json.dumps(r.to_dict())
        assert json.loads(r.to_json())["kind"] == "connection"


@pytest.mark.parametrize("name", ALL)
def test_report_equals_one_built_by_its_constructor(name: str) -> None:
    for r in reports(name):
        again = ConnectionReport(*[getattr(r, f.name) for f in dataclasses.fields(r)])
        assert again == r and hash(again) == hash(r) and repr(again) == repr(r)
        with pytest.raises(dataclasses.FrozenInstanceError):
            r.id = 7  # type: ignore[misc]


def test_shape_cache_gives_the_same_reports() -> None:
    """Reports derived afresh (each analysis starts with empty caches) equal those answered
    from caches that already hold the same handshakes' shapes."""
    from tlsprobe.offline.caches import AnalysisCaches
    warm = AnalysisCaches()

    def cached(name: str) -> list[ConnectionReport]:
        analysis = CaptureAnalysis(str(CAPTURES / name), AnalyzerOptions())
        analysis.caches = warm
        return [r for r, _ in analysis]
    first = reports("tls13_resumption.pcap") + reports("tls12_dhe.pcap")
    cached("tls13_resumption.pcap") + cached("tls12_dhe.pcap")
    shapes = len(warm.reports)
    fresh = cached("tls13_resumption.pcap") + cached("tls12_dhe.pcap")
    assert len(warm.reports) == shapes > 0  # the second time all from the cache
    assert first == fresh
    # the two connections of a resumption differ in shape: one full, one resumed
    assert [r.resumption for r in fresh[:2]] == [None, "psk"]


def test_statistics() -> None:
    stats = Statistics()
    for name in ("tls12_x25519.pcap", "tls13_hrr.pcap", "tls13_resumption.pcap",
                 "tls12_alert.pcap"):
        for r in reports(name):
            stats.add(r)
    d = stats.to_dict()
    assert d["connections"] == 5 and d["handshakes"] == 4 and d["client_hello_only"] == 1
    assert d["hello_retry_requests"] == 1 and d["resumed"] == 1
    versions = {row["name"]: row["connections"] for row in d["versions"]}
    assert versions == {"TLS 1.3 (0x0304)": 3, "TLS 1.2 (0x0303)": 1, "(none)": 1}
    groups = {row["name"]: row["connections"] for row in d["groups"]}
    assert groups["x25519 (0x001d)"] == 3 and groups["secp256r1 (0x0017)"] == 1
    assert d["alerts"] == [{"name": "server handshake_failure", "connections": 1}]


@pytest.mark.parametrize("name", ALL)
def test_brief_reports_hold_their_reports_values(name: str) -> None:
    """`brief` (the pcap table and --stats) gives each connection the fields shown, the
    same values its report holds: the same table rows and statistics."""
    whole, brief = reports(name), reports(name, brief=True)
    assert [r.id for r in brief] == [r.id for r in whole]
    assert any(isinstance(b, BriefReport) for b in brief) or \
        all(r.transport != "tcp" for r in whole)
    for b, r in zip(brief, whole):
        if isinstance(b, BriefReport):
            assert b == tuple(getattr(r, f) for f in BriefReport._fields)
        assert connection_row(b) == connection_row(r)
    a, c = Statistics(), Statistics()
    for r in whole:
        a.add(r)
    for b in brief:
        c.add(b)
    assert a.to_dict() == c.to_dict()


KEYED = sorted(p.name for p in CAPTURES.glob("*.pcap") if p.with_suffix(".keys").exists())


@pytest.mark.parametrize("name", KEYED)
def test_brief_reports_of_decrypted_connections_hold_their_reports_values(name: str) -> None:
    """With the capture's key log (the table of `pcap --keylog`), the same: a decrypted
    connection's brief report says what its report says, whether its handshake completed
    included."""
    from tlsprobe.engine.keylog import load_keylog
    keylog = load_keylog(str(CAPTURES / name.replace(".pcap", ".keys")))
    whole = reports(name, keylog=keylog)
    brief = reports(name, keylog=keylog, brief=True)
    assert any(r.decrypted for r in whole) and len(brief) == len(whole)
    for b, r in zip(brief, whole):
        assert b == tuple(getattr(r, f) for f in BriefReport._fields)
        assert connection_row(b) == connection_row(r)


def test_a_fatal_alert_after_a_completed_handshake_is_no_failure_in_either_report() -> None:
    """A decrypted connection whose handshake completed (both Finished read), then ended by
    a fatal alert: the table does not call the handshake failed, from its report or from
    its brief report (which had no `handshake_complete`: the brief table said "failed")."""
    from tlsprobe.engine.keylog import load_keylog
    from tlsprobe.model.probe import AlertInfo
    keylog = load_keylog(str(CAPTURES / "tls12_x25519.keys"))
    (done,) = [r for r in reports("tls12_x25519.pcap", keylog=keylog) if r.handshake_complete]
    fatal = AlertInfo("server", 2, 20, "bad_record_mac")
    ended = dataclasses.replace(done, alerts=(*done.alerts, fatal))
    brief = BriefReport(*(getattr(ended, f) for f in BriefReport._fields))
    assert "failed" not in " ".join(connection_row(ended))
    assert connection_row(brief) == connection_row(ended)
    unfinished = dataclasses.replace(ended, handshake_complete=False)
    assert "failed: server alert bad_record_mac" in " ".join(connection_row(unfinished))
    assert connection_row(BriefReport(*(getattr(unfinished, f) for f in
                                        BriefReport._fields))) == connection_row(unfinished)


def test_brief_reports_parse_no_certificate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table and --stats show no certificate, so their brief reports parse none (an
    X.509 parse and summary cost some 0.3 ms, most of a row for a server not met before);
    the full reports of the same capture do, and the brief ones still equal theirs (above)."""
    from tlsprobe.model import describe
    parsed: list[bytes] = []
    real = describe.certificate_info

    def counting(der: bytes) -> object:
        parsed.append(der)
        return real(der)
    monkeypatch.setattr(describe, "certificate_info", counting)
    whole = reports("tls12_unknown_ca.pcap")
    assert parsed and any(r.certificates for r in whole)
    parsed.clear()
    brief = reports("tls12_unknown_ca.pcap", brief=True)
    assert any(isinstance(b, BriefReport) for b in brief) and parsed == []


@pytest.mark.parametrize("name", ALL)
def test_json_text_is_the_reports_json(name: str) -> None:
    """`json_text` (pcap --json/--jsonl without filters, statistics or trace) writes each
    TCP connection's JSON without building its report: the same text, byte for byte."""
    whole, texts = reports(name), reports(name, json_text=True)
    assert [t.id for t in texts] == [r.id for r in whole]
    assert any(isinstance(t, ReportText) for t in texts) or \
        all(r.transport != "tcp" for r in whole)
    encoder = capture_encoder()
    for t, r in zip(texts, whole):
        assert t.to_json(encoder=encoder) == r.to_json() == json.dumps(r.to_dict())
        assert t.to_json(indent=1) == r.to_json(indent=1)


def test_milliseconds_text_is_that_of_the_rounded_value() -> None:
    """The JSON text path writes a report's milliseconds from the unrounded value: the
    same text as the rounded float's, also at rounding ties, signs, zero, large values
    and values that are not finite."""
    import random
    from tlsprobe.model.encode import number
    rng = random.Random(11)
    values = [0.0, -0.0, 0.0005, -0.0005, 0.0015, 1.0005, 2.0005, 1e-5, -1e-5, 5e-324,
              999999999.9995, 1e9, -1e9, 1e12 + 0.5, 1e17, float("nan"), float("inf"),
              -float("inf")]
    values += [rng.uniform(-20, 20) for _ in range(20000)]
    values += [(rng.randrange(10**9) + 0.5) / 1000 for _ in range(20000)]
    values += [(rng.uniform(1.7e9, 1.8e9) - rng.uniform(1.7e9, 1.8e9)) * 1000
               for _ in range(20000)]
    for v in values:
        assert build._ms_json(v) == number(round(v, 3)), v
    assert build._ms_json(None) == "null"


def test_timings_text_is_that_of_the_rounded_values() -> None:
    """A report's "timings" text (written inline when all times are there) is the JSON of
    its rounded milliseconds, whichever times are missing or not finite."""
    import random
    from tlsprobe.offline.facts import Facts
    rng = random.Random(5)
    for i in range(3000):
        base = rng.uniform(1.6e9, 1.8e9)
        times = [base + rng.uniform(0, 5) for _ in range(5)]
        if i % 7 == 0:
            times[rng.randrange(5)] = None
        if i % 11 == 0:
            times[rng.randrange(5)] = rng.choice([float("nan"), float("inf"), 1e13])
        first, last, ch, sh, done = times
        facts = Facts()
        facts.ch_ts, facts.sh_ts, facts.done_ts = ch, sh, done

        def ms(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else round((b - a) * 1000, 3)
        expected = json.dumps({"start": first, "server_hello_ms": ms(ch, sh),
                               "handshake_ms": ms(ch, done), "duration_ms": ms(first, last)})
        assert build._timings_json(first, last, facts) == expected, times


@pytest.mark.parametrize(("text", "code"), [("1.3", 0x0304), ("TLSv1.2", 0x0303),
                                             ("tls1_1", 0x0302), ("TLS1.0", 0x0301),
                                             ("ssl3", 0x0300), ("SSLv2", 0x0002),
                                             ("0x7f17", 0x7F17)])
def test_parse_version(text: str, code: int) -> None:
    assert parse_version(text) == code


def test_filter_values_are_checked() -> None:
    for bad in ({"groups": ["x99999"]}, {"versions": ["1.7"]}, {"ports": ["70000"]}):
        with pytest.raises(ValueError):
            ConnectionFilter.parse(**bad)  # type: ignore[arg-type]
    flt = ConnectionFilter.parse(hosts=["127.0.0.1"], ports=[], snis=["LOCAL*"])
    (r,) = reports("tls12_x25519.pcap")
    assert flt.active and flt.matches(r)
    assert not ConnectionFilter.parse(groups=["secp256r1"]).matches(r)


def test_fast_json_of_odd_values_is_json_dumps() -> None:
    """The per-shape JSON path with values the recorded captures do not have: non-ASCII
    and quotes in names, times that are not finite, a preamble with control bytes."""
    from tlsprobe.offline.facts import Facts
    from tlsprobe.model.capture import SHAPE_JSON
    where = build.Endpoints('caf\u00e9 "1".pcap', 3, "tcp", "tls", "::1", 1, "::2", 2, 1, 9,
                            float("nan"), float("inf"), 10, 20, "rst", True, b"GET \x00\xff",
                            5)
    r = build.build_report(where, Facts())
    assert r.__dict__.get(SHAPE_JSON) is not None  # the fast path is the one taken
    assert r.to_json() == json.dumps(r.to_dict())
    assert r.to_json() == r.to_json()  # the shape's text, once remembered
    facts = Facts()
    facts.problem("a \"quoted\" problem \u00e9")
    from tlsprobe.capture import ConnKey
    text = build.json_text_of(
        where.file, ConnKey(where.id, where.client_ip, where.client_port, where.server_ip,
                            where.server_port), where.first_frame, where.last_frame,
        where.first_ts, where.last_ts, [where.client_bytes, where.server_bytes], where.close,
        where.midstream, where.preamble, where.gap_bytes, facts).text  # type: ignore[arg-type]
    assert text == build.build_report(where, facts).to_json()
    assert text == json.dumps(build.build_report(where, facts).to_dict())
