"""Only tlsprobe/net opens connections (DESIGN.md: "net/ the ONLY place with sockets"): no
module elsewhere calls a socket constructor or an asyncio connection opener."""

from __future__ import annotations

import ast
from pathlib import Path

import tlsprobe

PACKAGE = Path(tlsprobe.__file__).resolve().parent
OPENERS = {"socket", "socketpair", "create_connection", "create_server", "fromfd",
           "open_connection", "start_server", "open_unix_connection", "start_unix_server"}


def _openers_called(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else None
            if name in OPENERS:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}()")
    return found


def test_no_socket_is_opened_outside_net():
    outside = [p for p in PACKAGE.rglob("*.py") if PACKAGE / "net" not in p.parents]
    assert outside, PACKAGE
    assert [hit for p in outside for hit in _openers_called(p)] == []


def test_the_check_sees_the_openers_in_net():
    assert any("socket()" in hit for hit in _openers_called(PACKAGE / "net" / "tcp.py"))
    assert any("open_connection()" in hit
               for hit in _openers_called(PACKAGE / "net" / "tcp_async.py"))
