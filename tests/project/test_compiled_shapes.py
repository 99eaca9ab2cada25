"""Code shapes mypyc translates wrongly, kept out of the modules the compiled fast path builds
(build_backend/compiled_modules.txt; its header lists them all).

The suite runs the sources, where these shapes are right, and tests/project/test_compiled.py
compares the builds only on what its captures exercise: these two broke compiled runs
without failing it (and a third turned a module's own function into another one), so they
are checked on the source text of every listed module, at once
and without a build.
"""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

from tests.project.test_compiled import REPO, listed_modules

#: calls without side effects, which may be evaluated twice (at a cost only)
PURE_CALLS = frozenset({"len", "min", "max"})


def _trees() -> list[tuple[str, ast.Module]]:
    out = []
    for name in listed_modules():
        path = REPO / Path(*name.split(".")).with_suffix(".py")
        out.append((name, ast.parse(path.read_text(), str(path))))
    return out


def test_no_call_in_a_slice_bound() -> None:
    """mypyc evaluates a slice's bounds once for the list/tuple/str/bytes fast path and,
    when the sliced object is none of these (a memoryview, a bytearray, ...), again for the
    generic one: `view[os.write(fd, view):]` in pipe_reader.write_all wrote its data twice,
    which answered the reader's eviction question twice and gave the two-process read other
    events than one process. A call in a bound is named first."""
    found = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Slice):
                continue
            for bound in (node.lower, node.upper, node.step):
                for sub in ast.walk(bound) if bound is not None else ():
                    if isinstance(sub, ast.Call) and not (
                            isinstance(sub.func, ast.Name) and sub.func.id in PURE_CALLS):
                        found.append(f"{name}:{sub.lineno}: {ast.unparse(bound)}")
    assert found == []


def test_no_class_attribute_in_an_exception() -> None:
    """A class-body assignment in a compiled class is an instance attribute's default, set
    by the native constructor: in an exception class (whose instances the base's
    constructor makes) it is on neither the class nor the instance, so a compiled
    `exit_code = EXIT_INTERNAL` exited with TlsprobeError's 2. An exception sets such a
    value in its `__init__`."""
    found = []
    for name in listed_modules():
        module = importlib.import_module(name)
        for cls_name, cls in vars(module).items():
            if not (inspect.isclass(cls) and cls.__module__ == name
                    and issubclass(cls, BaseException)):
                continue
            found += [f"{name}.{cls_name}.{attr}" for attr, value in vars(cls).items()
                      if not attr.startswith("__") and not inspect.isfunction(value)]
    assert found == []


def _bindings(tree: ast.Module) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(name -> what the module's top level binds it to, name -> what imports inside its
    functions bind it to); an import is told by "import module.name", anything else by its
    kind and line."""
    top: dict[str, set[str]] = {}
    local: dict[str, set[str]] = {}

    def imported(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
        module = node.module if isinstance(node, ast.ImportFrom) else None
        return [(alias.asname or alias.name.split(".")[0],
                 f"import {module}.{alias.name}" if module else f"import {alias.name}")
                for alias in node.names]

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top.setdefault(node.name, set()).add(f"def at {node.lineno}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for bound, what in imported(node):
                top.setdefault(bound, set()).add(what)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for sub in (n for t in targets for n in ast.walk(t)):
                if isinstance(sub, ast.Name):
                    top.setdefault(sub.id, set()).add(f"assignment at {node.lineno}")
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for bound, what in imported(node):
                        local.setdefault(bound, set()).add(what)
    return top, local


def test_a_function_import_binds_a_name_nothing_else_binds() -> None:
    """mypyc compiles an import inside a function as an assignment to the module's global
    of that name: `from tlsprobe.report.tables import render_rows` in offline_tables'
    render_details replaced the module's own render_rows (the pcap table's) for every later
    caller that looks it up on the module, and five functions of wire/_util.py each bound
    their registry function to one shared name `label` just before calling it. So a name
    a function imports is bound to the same object by every import of it in the module,
    and to nothing else at its top level."""
    found = []
    for name, tree in _trees():
        top, local = _bindings(tree)
        for bound, what in sorted(local.items()):
            if len(what) > 1 or (bound in top and top[bound] != what):
                found.append(f"{name}: {bound} <- {sorted(what | top.get(bound, set()))}")
    assert found == []
