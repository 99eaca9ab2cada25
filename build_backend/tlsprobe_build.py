"""tlsprobe's PEP 517 build backend: setuptools', plus the optional compiled fast path.

`pip install .` builds the pure-Python package, as always. With TLSPROBE_COMPILE=1 in the
environment (`TLSPROBE_COMPILE=1 pip install .`), the modules listed in
build_backend/compiled_modules.txt are also compiled to C extensions with mypyc (issue 35:
the capture and offline analysis' per-packet and per-connection work); the wheel then holds
both, and Python imports the extension in place of each listed module's source. It needs a C
compiler and Python's headers (Debian: `apt-get install gcc python3-dev`), and mypy and
the package's dependencies (mypyc type-checks what it compiles), which this backend adds to
the build's requirements only then. An editable install is never
compiled: its modules must be the sources being edited. docs/INTERNALS.md "The compiled
fast path".
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (the backend's other hooks, as they are)
    build_sdist,
    build_wheel,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

COMPILE = "TLSPROBE_COMPILE"
EDITABLE = "TLSPROBE_BUILDING_EDITABLE"
# mypyc ships with mypy; the test extra asks for the same (tests/project/test_compiled.py
# builds with the test environment's mypy)
MYPYC_REQUIREMENT = "mypy>=1.10"


def compile_requested() -> bool:
    """True when TLSPROBE_COMPILE asks for the compiled modules ("1", "yes", "true")."""
    return os.environ.get(COMPILE, "").strip().lower() in ("1", "yes", "true")


def runtime_dependencies() -> list[str]:
    """pyproject.toml's `dependencies`: mypyc type-checks the modules it compiles, and the
    types of what they import (cryptography's above all) must be there for that, as in the
    environment `mypy --strict` runs in."""
    with open(Path(__file__).resolve().parent.parent / "pyproject.toml", "rb") as file:
        dependencies: list[str] = tomllib.load(file)["project"]["dependencies"]
    return dependencies


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """setuptools' requirements; when the compiled modules are asked for, also mypy and the
    package's own dependencies (for mypyc's type check)."""
    requires = list(_setuptools.get_requires_for_build_wheel(config_settings))
    if compile_requested():
        requires += [MYPYC_REQUIREMENT, *runtime_dependencies()]
    return requires


def build_editable(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                   metadata_directory: str | None = None) -> str:
    """setuptools' editable wheel, told (through the environment setup.py reads) not to
    compile: an extension beside an edited source would hide the edit."""
    os.environ[EDITABLE] = "1"
    try:
        return str(_setuptools.build_editable(wheel_directory, config_settings,
                                              metadata_directory))
    finally:
        del os.environ[EDITABLE]
