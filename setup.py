"""The optional compiled fast path's build (everything else is in pyproject.toml).

Without TLSPROBE_COMPILE=1 this adds nothing: the package is pure Python. With it, the
modules in build_backend/compiled_modules.txt are compiled by mypyc into C extensions placed
beside their sources (build_backend/tlsprobe_build.py says when and why).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, str(Path(__file__).resolve().parent / "build_backend"))
from tlsprobe_build import COMPILE, EDITABLE, compile_requested

ROOT = Path(__file__).resolve().parent
# the setup.py commands that build (PEP 517's build_wheel runs bdist_wheel); the others
# (egg_info, dist_info: requirements and metadata) need no extension
BUILDING = {"bdist_wheel", "build", "build_ext", "install", "develop"}
NEEDS = ("a C compiler and Python's headers (Debian: apt-get install gcc python3-dev); "
         f"without {COMPILE}=1, `pip install .` installs the pure-Python package")


def compiled_modules() -> list[str]:
    """The module files to compile, relative to the project's root."""
    text = (ROOT / "build_backend" / "compiled_modules.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


class BuildExt(build_ext):
    """build_ext whose failure (no compiler, no headers) says what the build needs."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # distutils' errors differ between setuptools versions
            raise SystemExit(f"{COMPILE}=1: compiling the fast path failed ({exc}); it needs "
                             f"{NEEDS}") from exc


def missing_toolchain() -> str | None:
    """What of the C toolchain is missing (the compiler the build would run, Python.h), or
    None."""
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    program = shlex.split(compiler)[0] if compiler.strip() else "cc"
    if shutil.which(program) is None:
        return f"no C compiler ({program!r} not found)"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        return f"no Python headers ({headers} not found)"
    return None


def ext_modules() -> list[object]:
    """mypyc's extensions for the listed modules, or none (pure Python)."""
    if not compile_requested() or os.environ.get(EDITABLE):
        return []
    if not BUILDING.intersection(sys.argv[1:]):
        return []   # asked for requirements or metadata only: mypy may not be there yet
    missing = missing_toolchain()
    if missing:   # said before mypyc's minute of type-checking and code generation
        raise SystemExit(f"{COMPILE}=1: {missing}; compiling the fast path needs {NEEDS}")
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        raise SystemExit(f"{COMPILE}=1: mypyc (part of mypy) is not in the build environment "
                         f"({exc}); pip adds it to an isolated build, or install mypy") from exc
    os.chdir(ROOT)  # mypyc names the modules by their paths from here
    # the C compiler's optimisation: -O3 unless TLSPROBE_COMPILE_OPT says (0 to 3); the
    # suite's build (tests/project/test_compiled.py) uses 0, a fraction of the compile time:
    # what it checks is mypyc's translation, which the level does not change
    level = os.environ.get("TLSPROBE_COMPILE_OPT", "3")
    if level not in ("0", "1", "2", "3"):
        raise SystemExit(f"TLSPROBE_COMPILE_OPT={level!r}: expected 0, 1, 2 or 3")
    return list(mypycify(compiled_modules(), opt_level=level, group_name="tlsprobe._native"))


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildExt})
