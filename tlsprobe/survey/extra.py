"""The optional `cluster` extra (pip install '.[cluster]' in the checkout): pyarrow and
dask.distributed, imported only through here so that a missing one is a one-line usage
error (exit 2) naming the extra, never an ImportError, and `pip install .` alone keeps
working for every other command (tests/project/test_packaging.py checks the declared imports)."""

from __future__ import annotations

import importlib
from types import ModuleType

from tlsprobe.errors import UsageError

HINT = "pip install 'dask[distributed]' pyarrow (or pip install '.[cluster]' in the tlsprobe checkout)"


def _module(name: str, why: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise UsageError(f"{why}: {name.split('.')[0]} is not installed ({HINT})") from None


def pyarrow() -> ModuleType:
    """The pyarrow module (untyped: it ships no complete hints)."""
    return _module("pyarrow", "survey files are Parquet")


def parquet() -> ModuleType:
    """pyarrow.parquet."""
    return _module("pyarrow.parquet", "survey files are Parquet")


def distributed() -> ModuleType:
    """dask.distributed (raises UsageError when absent; see `has_distributed`)."""
    return _module("distributed", "--scheduler needs Dask")


def has_distributed() -> bool:
    """Whether dask.distributed can be imported."""
    try:
        importlib.import_module("distributed")
    except ImportError:
        return False
    return True
