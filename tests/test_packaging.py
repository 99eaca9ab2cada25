"""The installed package imports only the standard library and its declared dependencies.

An import of a package that only the test extra (or the development machine) brings would
work under `pip install -e '.[test]'` and fail for a user after `pip install .`: every
module of tlsprobe is read here and each runtime import (imports under TYPE_CHECKING are
not run) is checked against `sys.stdlib_module_names` and pyproject's dependencies.
"""
from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# distribution name -> the top-level module it installs
MODULE_OF = {"cryptography": "cryptography", "scapy": "scapy", "tlslite-ng": "tlslite",
             "rich": "rich", "kyber-py": "kyber_py"}


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip()
             for d in project["dependencies"]}
    assert names <= set(MODULE_OF), f"map these distributions to modules: {names - set(MODULE_OF)}"
    return {MODULE_OF[n] for n in names}


def _runtime_imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_runtime_imports_are_stdlib_or_declared() -> None:
    allowed = set(sys.stdlib_module_names) | _declared() | {"tlsprobe", "__future__"}
    stray = {}
    for path in sorted((REPO / "tlsprobe").rglob("*.py")):
        extra = _runtime_imports(ast.parse(path.read_text(), str(path))) - allowed
        if extra:
            stray[str(path.relative_to(REPO))] = sorted(extra)
    assert stray == {}, f"undeclared runtime imports: {stray}"
