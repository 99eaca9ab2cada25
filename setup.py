"""The optional compiled fast path's build (everything else is in pyproject.toml).

Without TLSPROBE_COMPILE=1 this adds nothing: the package is pure Python. With it, the
modules in build_backend/compiled_modules.txt are compiled by mypyc into C extensions placed
beside their sources (build_backend/tlsprobe_build.py says when and why).
"""

from __future__ import annotations

import os
import sys
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


def ext_modules() -> list[object]:
    """mypyc's extensions for the listed modules, or none (pure Python)."""
    if not compile_requested() or os.environ.get(EDITABLE):
        return []
    if not BUILDING.intersection(sys.argv[1:]):
        return []   # asked for requirements or metadata only: mypy may not be there yet
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        raise SystemExit(f"{COMPILE}=1: mypyc (part of mypy) is not in the build environment "
                         f"({exc}); pip adds it to an isolated build, or install mypy") from exc
    os.chdir(ROOT)  # mypyc names the modules by their paths from here
    return list(mypycify(compiled_modules(), opt_level="3", group_name="tlsprobe._native"))


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildExt})
