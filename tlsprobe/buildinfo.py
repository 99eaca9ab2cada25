"""Which build of tlsprobe runs: pure Python, or with the optional compiled fast path.

`TLSPROBE_COMPILE=1 pip install .` compiles the modules listed in
build_backend/compiled_modules.txt with mypyc (issue 35); Python then imports each one's C
extension, which sits beside its source, in place of the source. `tlsprobe --version` says
which build it is, so that a figure or a bug report can name it.
"""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

# mypyc's runtime library for the group (setup.py's group_name): not a module of ours
_RUNTIME = "_native__mypyc"


def compiled_modules() -> tuple[str, ...]:
    """The names of this installation's modules that are C extensions, sorted."""
    package = Path(__file__).resolve().parent
    found = []
    for path in package.rglob("*.so" if any(s.endswith(".so") for s in EXTENSION_SUFFIXES)
                              else "*.pyd"):
        suffix = next((s for s in EXTENSION_SUFFIXES if path.name.endswith(s)), None)
        if suffix is None or path.name.startswith(_RUNTIME):
            continue
        parts = path.relative_to(package.parent).parts
        found.append(".".join(parts[:-1] + (path.name[:-len(suffix)],)))
    return tuple(sorted(found))


def version_line() -> str:
    """`tlsprobe X.Y.Z (pure Python)` or `tlsprobe X.Y.Z (compiled fast path: N modules)`."""
    from tlsprobe._version import __version__
    compiled = compiled_modules()
    build = f"compiled fast path: {len(compiled)} modules" if compiled else "pure Python"
    return f"tlsprobe {__version__} ({build})"
