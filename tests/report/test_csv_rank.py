"""`scan --csv FILE`: the `rank` column claims the server's order only where the audit
established one, against openssl s_server on loopback with and without -serverpref."""
from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

LISTS = (("group", "groups", "name"), ("suite", "suites", "iana_name"),
         ("signature_scheme", "signature_schemes", "name"))


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("serverpref", [False, True])
def test_rank_only_where_the_server_enforces_its_order(server_cache: Callable[..., Any],
                                                       run_cli: Callable[..., Any],
                                                       tmp_path: Path,
                                                       serverpref: bool) -> None:
    """A server that follows the client's order has no rank (it had 1, 2, 3... as if the
    listing, which is only tlsprobe's offer, were its preference); a server that enforces
    its order keeps its places; the rows keep the text view's listing either way."""
    srv = server_cache("openssl", proto="tls1_2", serverpref=serverpref)
    out = tmp_path / "scan.csv"
    done = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "audit", "--no-verify",
                   "--json", "--csv", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    orders = set()
    for section, key, name in LISTS:
        for audit in report[key]:
            if not audit["supported"]:
                continue
            got = [(r["rank"], r["name"]) for r in rows
                   if r["section"] == section and r["version"] == audit["version"]["name"]
                   and r["status"] == "supported"]
            names = [c[name] for c in audit["supported"]]
            ranks = [str(i) if audit["order"] == "server" else ""
                     for i in range(1, len(names) + 1)]
            assert got == list(zip(ranks, names)), (section, audit["order"], got)
            orders.add(audit["order"])
    assert orders == {"server" if serverpref else "client"}, orders
