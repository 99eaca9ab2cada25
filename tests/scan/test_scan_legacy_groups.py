"""The group audit of a server that speaks TLS 1.1 and/or 1.0 but not TLS 1.2 (legacy
devices): the same ServerKeyExchange elimination as TLS 1.2's, run for the highest older
version spoken, against real loopback servers whose curves, order and DH parameters are
known from their configuration:

- openssl s_server -tls1_1 with -groups P-384:P-256:X25519 -serverpref (server order) and
  with -groups P-384:P-256 (client order), default (2048-bit RFC 3526) DH parameters;
- openssl s_server -tls1 with -named_curve P-384 and a 1024-bit RFC 5114 prime;
- gnutls-serv with a TLS 1.0-1.1 priority string, server precedence and RFC 7919 groups.

The groups must be exactly the configured ones, in the right order, named as that
version's in JSON, text, CSV and HTML; the DH findings, the dh check and the rating must
count the older version's parameters once (not again from the suites' ServerKeyExchange).
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.scan.test_scan_servers import audit, names

LEGACY = "ECDHE-RSA-AES128-SHA:DHE-RSA-AES128-SHA:@SECLEVEL=0"


def _group(report: dict[str, Any], version: str) -> dict[str, Any]:
    (g,) = [g for g in report["groups"] if g["version"]["name"] == version]
    return g


@pytest.mark.needs_impl("openssl")
def test_tls11_only_server_order_in_every_output(server_cache, run_cli, tmp_path: Path):
    srv = server_cache("openssl", proto="tls1_1", groups="P-384:P-256:X25519",
                       serverpref=True, ciphers=LEGACY)
    target = f"127.0.0.1:{srv.port}"
    code, out, err = run_cli("scan", target, "--checks", "audit", "--json", "--no-progress",
                             "--no-verify", "--csv", str(tmp_path / "s.csv"), "--html",
                             str(tmp_path / "s.html"))
    assert code == 0, err
    r = json.loads(out)
    assert [g["version"]["name"] for g in r["groups"]] == ["TLS 1.3", "TLS 1.2", "TLS 1.1"]
    assert _group(r, "TLS 1.2")["notes"] == ["not tested: the server does not speak TLS 1.2"]
    g11 = _group(r, "TLS 1.1")
    assert g11["spoken"] is True and g11["method"] == "server_key_exchange"
    assert [g["name"] for g in g11["supported"]] == ["secp384r1", "secp256r1", "x25519"]
    assert g11["order"] == "server" and g11["inconclusive"] == []
    assert "x448" in [g["name"] for g in g11["not_supported"]]
    dhe = g11["dhe"]
    assert dhe["status"] == "fixed" and dhe["fixed"]["bits"] == 2048, dhe
    with (tmp_path / "s.csv").open(encoding="utf-8", newline="") as fh:
        rows = [(row["version"], row["rank"], row["name"]) for row in csv.DictReader(fh)
                if row["section"] == "group"]
    assert rows == [("TLS 1.1", "1", "secp384r1"), ("TLS 1.1", "2", "secp256r1"),
                    ("TLS 1.1", "3", "x25519")]
    page = (tmp_path / "s.html").read_text("utf-8")
    assert "<h3>Groups, TLS 1.1: ECDHE and DHE suites, ServerKeyExchange" in page
    code, text, err = run_cli("scan", target, "--checks", "audit", "--no-progress",
                              "--no-verify")
    assert code == 0, err
    section = text[text.index("Groups, TLS 1.1: ECDHE and DHE suites, ServerKeyExchange"):]
    section = section[:section.index("\n\n")]
    lines = [line.split() for line in section.splitlines()]
    assert [ln[:2] for ln in lines if ln and ln[0].isdigit()] == \
        [["1", "secp384r1"], ["2", "secp256r1"], ["3", "x25519"]], section
    assert "Order: the server enforces its own order" in section


@pytest.mark.needs_impl("openssl")
def test_tls11_client_order_and_groups_alone(server_cache):
    """Without the versions check (groups alone), one hello of TLS 1.1 and of TLS 1.0 tells
    which older version to audit."""
    srv = server_cache("openssl", proto="tls1_1", groups="P-384:P-256", ciphers=LEGACY)
    r = audit(srv)
    assert [g.version.name for g in r.groups] == ["TLS 1.3", "TLS 1.2", "TLS 1.1"]
    g11 = r.group_audit(0x0302)
    assert g11 is not None and g11.spoken
    assert names(g11.supported) == ["secp256r1", "secp384r1"]   # listed as offered
    assert g11.order == "client" and g11.inconclusive == ()
    assert r.group_audit(0x0303).spoken is False


@pytest.mark.needs_impl("openssl")
def test_tls10_named_curve_and_weak_dh_counted_once(server_cache, run_cli):
    srv = server_cache("openssl", proto="tls1_0", extra=["-named_curve", "P-384"],
                       dhparam="rfc5114_1024_160", ciphers=LEGACY)
    code, out, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "audit,dh",
                             "--json", "--no-progress", "--no-verify", timeout=120)
    assert code == 0, err
    r = json.loads(out)
    assert [g["version"]["name"] for g in r["groups"]] == ["TLS 1.3", "TLS 1.2", "TLS 1.0"]
    g10 = _group(r, "TLS 1.0")
    assert [g["name"] for g in g10["supported"]] == ["secp384r1"] and g10["order"] == "single"
    fixed = g10["dhe"]["fixed"]
    assert g10["dhe"]["status"] == "fixed" and fixed["bits"] == 1024, g10["dhe"]
    weak = [(f["version"], f["items"]) for f in r["findings"] if f["code"] == "dh.weak"]
    assert weak == [("TLS 1.0", [fixed["name"]])], r["findings"]
    too_small = [f["version"] for f in r["findings"] if f["code"] == "dh.too_small"]
    assert too_small == ["TLS 1.0"], r["findings"]
    dh = next(c for c in r["check_results"] if c["name"] == "dh")
    assert dh["verdict"] == "vulnerable" and "in TLS 1.0" in dh["reason"], dh
    assert dh["evidence"] == [f"{fixed['name']} (RFC 5114), 1024 bits (TLS 1.0)"], dh
    cap = next(c for c in r["rating"]["caps"] if c["rule"] == "weak_key")
    assert cap["cap"] == "B" and len(cap["evidence"]) == 1, cap   # not again per DHE suite
    assert cap["evidence"][0].startswith("DHE parameters "), cap
    assert r["rating"]["key_exchange"]["score"] == 80, r["rating"]


@pytest.mark.needs_impl("gnutls")
def test_gnutls_tls11_rfc7919_groups(server_cache):
    srv = server_cache("gnutls", proto="tls1_0-tls1_1", groups="P-384:X25519:ffdhe3072:ffdhe2048",
                       serverpref=True)
    r = audit(srv, ("versions", "groups"))
    g11 = r.group_audit(0x0302)
    assert g11 is not None and names(g11.supported) == ["secp384r1", "x25519"]
    assert g11.order == "server" and g11.inconclusive == ()
    assert g11.dhe is not None and g11.dhe.status == "rfc7919"
    assert names(g11.dhe.negotiated) == ["ffdhe3072", "ffdhe2048"]
    assert g11.dhe.order == "server"
    assert r.group_audit(0x0301) is None   # only the highest older version is audited
