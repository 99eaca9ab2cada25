"""The compiled fast path's modules read their module constants as `Final` (issue 35).

mypyc compiles a read of a module-level name that is not `Final` into a lookup in the
module's dict on every use (145 instructions); a `Final` one is inlined (a literal) or kept
in a C static. Such reads in the per-packet and per-connection functions cost 12 k
instructions a short connection before they were made `Final` (docs/INTERNALS.md, "What
makes compiled code slow"). This test keeps a new constant from being read that way: in
every module of build_backend/compiled_modules.txt, a function that reads an upper-case
module constant, its own or one imported from another listed module, reads a `Final` one.
It checks the sources: no compiler needed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSTANT = re.compile(r"^_?[A-Z][A-Z0-9_]*$")


def _listed() -> list[str]:
    text = (ROOT / "build_backend" / "compiled_modules.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _constants(tree: ast.Module) -> dict[str, bool]:
    """The module's upper-case names assigned at its top level: whether each is Final
    (names bound by a TypeVar or a type alias are types, not constants: left out)."""
    out: dict[str, bool] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if CONSTANT.match(node.target.id):
                out[node.target.id] = ast.unparse(node.annotation).startswith("Final")
        elif isinstance(node, ast.Assign):
            value = node.value
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "TypeVar" or \
                    isinstance(value, ast.Subscript | ast.BinOp):
                continue
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and CONSTANT.match(name.id):
                        out[name.id] = False
    return out


def _read_in_functions(tree: ast.Module) -> set[str]:
    """Names read inside the module's functions and lambdas (what compiled code looks up)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load):
                    names.add(inner.id)
    return names


def test_compiled_modules_read_final_constants() -> None:
    listed = _listed()
    trees = {path: ast.parse((ROOT / path).read_text()) for path in listed}
    constants = {path: _constants(tree) for path, tree in trees.items()}
    by_module = {path[:-3].replace("/", "."): path for path in listed}
    slow = []
    for path, tree in trees.items():
        origin = {name: (path, name) for name in constants[path]}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module in by_module:
                for alias in node.names:
                    origin[alias.asname or alias.name] = (by_module[node.module], alias.name)
        for name in sorted(_read_in_functions(tree)):
            where = origin.get(name)
            if where is not None and constants[where[0]].get(where[1]) is False:
                slow.append(f"{path}: {name} ({where[0]})")
    assert not slow, "module constants read by compiled functions without Final:\n" + \
        "\n".join(slow)
