"""The scan's chain completeness check and the trust verdict follow one rule: OpenSSL
(without -partial_chain) anchors a path only at a self-signed certificate of the trust
store. With a store that holds the intermediate or the leaf but no root, s_client says 2
or 20 and the trust verdict says the same; the chain check said "complete and in order ...
to the trust store" (it counted any store certificate as reaching the store). It now says
incomplete, naming the issuer the store lacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.probes.test_probe_verify_openssl_codes import Case, _build, _openssl_verdict


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize(("store", "expected"), [("inter", 2), ("leaf", 20), ("root", 0)])
def test_chain_check_agrees_with_the_trust_verdict(tls_server: Callable[..., Any],
                                                   run_cli: Callable[..., Any],
                                                   tmp_path: Path, store: str,
                                                   expected: int) -> None:
    case = Case(store=store)
    root, leaf, key, inter = _build(case, tmp_path)
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter)])
    code, _ = _openssl_verdict(srv.port, root, case.host)   # the real tool first
    assert code == expected
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "chain", "--json",
                  "--no-progress", "--no-policy", "--cafile", root, "--sni", case.host)
    assert res.stderr == "", res.stderr
    report = json.loads(res.stdout.splitlines()[0])
    assert report["trust"]["code"] == code, report["trust"]
    check = next(c for c in report["check_results"] if c["name"] == "chain")
    if code == 0:
        assert check["verdict"] == "not vulnerable", check
        assert check["details"]["complete"] is True, check
        return
    assert check["verdict"] == "vulnerable" and check["details"]["complete"] is False, check
    assert check["details"]["missing_issuer"] == "CN=Codes Root", check
    assert "incomplete" in check["reason"], check
    if store == "inter":
        assert "is not self-signed" in check["reason"], check
