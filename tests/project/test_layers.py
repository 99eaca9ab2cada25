"""The package's layering, read from the code: docs/INTERNALS.md's table is the contract.

Every module under tlsprobe/ is parsed (nothing is imported) and each of its imports, at
module level, inside functions and under TYPE_CHECKING, is checked; an `import_module(...)`
call (importlib's, or `__import__`) with a constant name is an import of that module, one
with an f-string whose start is constant (`f"tlsprobe.commands.{name}"`) an import of every
module whose name starts so:
(a) an import between two packages must be allowed by the table "Packages and their allowed
    imports" in docs/INTERNALS.md (parsed here, so the document and the test cannot drift);
(b) nothing below commands/ imports tlsprobe.report (renderers are the commands' business);
(c) sockets are created only in tlsprobe/net/;
(d) no import cycle between modules (Tarjan's strongly connected components): "cycle" over
    the imports at module level, those under TYPE_CHECKING included (a type-only import
    still makes two modules depend on each other); "lazy-cycle" for a cycle that needs an
    import inside a function too (the issue's "no module imports its caller"). The package
    root counts like any module: it imports the API on first use, so a module that imports
    the root (for `__version__`, say) closes a cycle; the version is in tlsprobe/_version.py;
(e) rich only in report/, scapy only in capture/.

KNOWN_VIOLATIONS are the ones the code has today (issue 12 removes them, in parallel
branches); a known violation that no longer occurs fails the test as well, so the list can
only shrink.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tlsprobe"
DOC = REPO / "docs" / "INTERNALS.md"

# What still breaks a rule, each with its reason; the test fails when one is fixed, so the
# list only shrinks.
KNOWN_VIOLATIONS: frozenset[str] = frozenset()

#: calls that create a socket or a connection (on socket, asyncio or an event loop)
SOCKET_CALLS = frozenset({
    "socket", "create_connection", "create_server", "socketpair", "fromfd",
    "open_connection", "start_server", "open_unix_connection", "start_unix_server",
    "create_unix_connection", "create_unix_server", "create_datagram_endpoint",
})
#: the packages above everything else: a command may render (report/), nothing below may
TOP = frozenset({"commands", "cli", "__main__", "api"})


@dataclass(frozen=True)
class Import:
    source: str         # importing module, e.g. tlsprobe.probes.audit.run
    target: str         # imported module (a submodule where `from X import name` names one)
    where: str          # "top" (runs on import), "type" (module level, under TYPE_CHECKING)
                        # or "function"


@dataclass
class Module:
    name: str
    tree: ast.Module
    imports: list[Import] = field(default_factory=list)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def package_of(name: str) -> str:
    """tlsprobe.probes.audit.run -> probes; tlsprobe.cli -> cli; tlsprobe -> tlsprobe."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _walk(node: ast.AST, where: str) -> Iterator[tuple[ast.AST, str]]:
    """Every node below `node` with where it is: "top", "type" or "function" (see Import)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, "function")
        elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            inner = "type" if where == "top" else where
            for stmt in child.body:
                yield stmt, inner
                yield from _walk(stmt, inner)
            for stmt in child.orelse:
                yield stmt, where
                yield from _walk(stmt, where)
        else:
            yield child, where
            yield from _walk(child, where)


def _targets(node: ast.Import | ast.ImportFrom, source: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = source.split(".") if is_package else source.split(".")[:-1]
        parts = parts[:len(parts) - node.level + 1]
        base = ".".join(parts + ([node.module] if node.module else []))
    subs = [f"{base}.{alias.name}" for alias in node.names]
    named = [s for s in subs if s.startswith("tlsprobe.") and is_module(s)]
    return named if len(named) == len(subs) else [base] + named


#: calls that import the module their first argument names
IMPORT_CALLS = frozenset({"import_module", "__import__"})


def _called_name(node: ast.Call, source: str, is_package: bool) -> str | None:
    """What an `import_module(...)` / `__import__(...)` call imports: the constant name
    (relative names resolved against the calling module's package, as `package=__package__`
    does), or an f-string's constant start followed by "*"; None for any other call."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else None
    if called not in IMPORT_CALLS or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        name = arg.value
    elif isinstance(arg, ast.JoinedStr) and arg.values and \
            isinstance(arg.values[0], ast.Constant) and isinstance(arg.values[0].value, str):
        name = arg.values[0].value + "*"
    else:
        return None
    if name.startswith("."):
        level = len(name) - len(name.lstrip("."))
        parts = source.split(".") if is_package else source.split(".")[:-1]
        name = ".".join(parts[:len(parts) - level + 1] + [name.lstrip(".")])
    return name


def _call_targets(name: str, source: str) -> list[str]:
    """The modules a called name stands for: itself, or for "prefix*" every module of the
    package whose name starts with the prefix (the caller left out)."""
    if not name.endswith("*"):
        return [name]
    prefix = name[:-1]
    return sorted(str(module_name(path)) for path in PACKAGE.rglob("*.py")
                  if module_name(path).startswith(prefix) and module_name(path) != source)


def load_modules() -> dict[str, Module]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        is_package = path.name == "__init__.py"
        module = Module(name, ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for node, where in _walk(module.tree, "top"):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, name, is_package):
                    module.imports.append(Import(name, target, where))
            elif isinstance(node, ast.Call):
                called = _called_name(node, name, is_package)
                for target in _call_targets(called, name) if called else ():
                    module.imports.append(Import(name, target, where))
        modules[name] = module
    return modules


MODULES = load_modules()


# -- the document's table ------------------------------------------------------------------
def allowed_imports() -> dict[str, set[str]]:
    """docs/INTERNALS.md: package -> the packages it may import (rows of the table
    `| package | one job | may import |`, packages in backticks; "(all packages)" once)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Packages and their allowed imports", 1)[1].split("\n## ", 1)[0]
    everyone: set[str] = set()
    table: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not line.lstrip().startswith("|") or set(cells[0]) <= {"-", " "}:
            continue
        names = [n.rstrip("/").removesuffix(".py") for n in re.findall(r"`([^`]+)`", cells[0])]
        allowed = {n.rstrip("/").removesuffix(".py") for n in re.findall(r"`([^`]+)`", cells[2])}
        if cells[0] == "(all packages)":
            everyone |= allowed
        for name in names:
            table[name] = allowed
    assert table and everyone, "docs/INTERNALS.md has no allowed-imports table"
    return {name: allowed | everyone | {name} for name, allowed in table.items()}


ALLOWED = allowed_imports()


# -- the rules -----------------------------------------------------------------------------
def edge_violations() -> set[str]:
    found = set()
    for module in MODULES.values():
        for imp in module.imports:
            if not imp.target.startswith("tlsprobe"):
                continue
            source, target = package_of(imp.source), package_of(imp.target)
            if target == "report" and source not in TOP | {"report"}:
                continue    # rule (b) names these
            if target not in ALLOWED.get(source, set()):
                found.add(f"edge {imp.source} -> {imp.target}")
    return found


def report_violations() -> set[str]:
    return {f"report {imp.source} -> {imp.target}"
            for module in MODULES.values() for imp in module.imports
            if package_of(imp.target) == "report" and imp.target.startswith("tlsprobe.")
            and package_of(imp.source) not in TOP | {"report"}}


def socket_violations() -> set[str]:
    found = set()
    for module in MODULES.values():
        if package_of(module.name) == "net":
            continue
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in SOCKET_CALLS:
                found.add(f"socket {module.name} {ast.unparse(func)}")
            elif isinstance(func, ast.Name) and func.id in SOCKET_CALLS:
                found.add(f"socket {module.name} {func.id}")
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the components with more than one module, or a module
    importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph.get(node, ()):
                        components.append(sorted(component))
    return components


def import_graph(where: frozenset[str]) -> dict[str, set[str]]:
    """module -> the tlsprobe modules it imports from the places in `where`. An edge to one's
    own enclosing package is left out (a package's __init__ importing its submodules is the
    normal way round), except to the package root, whose `__getattr__` imports the API and
    with it nearly everything."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for module in MODULES.values():
        for imp in module.imports:
            if imp.where not in where or imp.target not in MODULES:
                continue
            if imp.target != "tlsprobe" and module.name.startswith(imp.target + "."):
                continue
            graph[module.name].add(imp.target)
    return graph


def cycle_violations() -> set[str]:
    module_level = strongly_connected(import_graph(frozenset({"top", "type"})))
    everywhere = strongly_connected(import_graph(frozenset({"top", "type", "function"})))
    return {"cycle " + " ".join(c) for c in module_level} | \
        {"lazy-cycle " + " ".join(c) for c in everywhere if c not in module_level}


def library_violations() -> set[str]:
    found = set()
    for module in MODULES.values():
        for imp in module.imports:
            top = imp.target.split(".")[0]
            if top == "rich" and package_of(module.name) != "report":
                found.add(f"rich {module.name}")
            if top == "scapy" and package_of(module.name) != "capture":
                found.add(f"scapy {module.name}")
    return found


def _check(kind: str, found: set[str]) -> None:
    new = sorted(v for v in found if v not in KNOWN_VIOLATIONS)
    assert new == [], f"{kind}:\n" + "\n".join(new)


# -- tests ---------------------------------------------------------------------------------
def test_edges_are_those_docs_internals_allows() -> None:
    _check("imports between packages that docs/INTERNALS.md's table does not allow "
           "(change the code, or the table with a reason)", edge_violations())


def test_nothing_below_commands_imports_report() -> None:
    _check("modules below commands/ importing tlsprobe.report", report_violations())


def test_sockets_only_in_net() -> None:
    _check("sockets created outside tlsprobe/net/", socket_violations())


def test_no_import_cycles() -> None:
    _check("import cycles (modules importing each other at import time)", cycle_violations())


def test_rich_only_in_report_and_scapy_only_in_capture() -> None:
    _check("rich outside report/, scapy outside capture/", library_violations())


def test_known_violations_still_occur() -> None:
    """The list only shrinks: a fixed violation is taken off it."""
    found = (edge_violations() | report_violations() | socket_violations()
             | cycle_violations() | library_violations())
    assert sorted(KNOWN_VIOLATIONS - found) == [], "fixed: remove these from KNOWN_VIOLATIONS"


def test_every_package_has_a_row() -> None:
    packages = {package_of(name) for name in MODULES} - {"tlsprobe"}
    assert sorted(packages - set(ALLOWED)) == [], "add a row to docs/INTERNALS.md's table"


def test_the_checks_catch_what_they_look_for() -> None:
    """Each rule finds a planted violation (so that an empty result means something)."""
    tree = ast.parse("import socket\nimport rich\nfrom tlsprobe.report import tables\n"
                     "def f():\n    from tlsprobe.commands import probe\n"
                     "    return socket.socket()\n")
    planted = Module("tlsprobe.wire.planted", tree)
    for node, where in _walk(tree, "top"):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _targets(node, planted.name, False):
                planted.imports.append(Import(planted.name, target, where))
    assert Import(planted.name, "tlsprobe.commands.probe", "function") in planted.imports
    MODULES[planted.name] = planted
    try:
        assert "edge tlsprobe.wire.planted -> tlsprobe.commands.probe" in edge_violations()
        assert "report tlsprobe.wire.planted -> tlsprobe.report.tables" in report_violations()
        assert "socket tlsprobe.wire.planted socket.socket" in socket_violations()
        assert "rich tlsprobe.wire.planted" in library_violations()
    finally:
        del MODULES[planted.name]
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == \
        [["a", "b", "c"]]


def test_import_module_calls_and_the_root_count_as_imports() -> None:
    """`importlib.import_module` with a constant (or an f-string's constant start) is an
    import; the package root is a module like the others (it imports the API, which imports
    nearly everything): a module importing it for `__version__` closes a cycle."""
    tree = ast.parse("import importlib\nfrom tlsprobe import __version__\n"
                     "def f(name):\n"
                     "    importlib.import_module(f'tlsprobe.probes.audit.{name}')\n"
                     "    return importlib.import_module('tlsprobe.commands.scan')\n")
    planted = Module("tlsprobe.wire.planted", tree)
    for node, where in _walk(tree, "top"):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _targets(node, planted.name, False):
                planted.imports.append(Import(planted.name, target, where))
        elif isinstance(node, ast.Call):
            called = _called_name(node, planted.name, False)
            for target in _call_targets(called, planted.name) if called else ():
                planted.imports.append(Import(planted.name, target, where))
    targets = {imp.target for imp in planted.imports}
    assert {"tlsprobe", "tlsprobe.commands.scan", "tlsprobe.probes.audit.run",
            "tlsprobe.probes.audit.scheduler"} <= targets, targets
    MODULES[planted.name] = planted
    try:
        edges = edge_violations()
        assert "edge tlsprobe.wire.planted -> tlsprobe.commands.scan" in edges
        assert "edge tlsprobe.wire.planted -> tlsprobe" in edges   # _version, not the root
    finally:
        del MODULES[planted.name]
    # a module the API reaches, importing the root: root -> api -> ... -> it -> root
    hello = MODULES["tlsprobe.wire.hello"]
    hello.imports.append(Import(hello.name, "tlsprobe", "top"))
    try:
        assert any(hello.name in c.split() and "tlsprobe" in c.split()
                   for c in cycle_violations()), cycle_violations()
    finally:
        hello.imports.pop()
