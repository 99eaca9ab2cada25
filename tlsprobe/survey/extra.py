"""The optional `cluster` extra (pip install '.[cluster]' in the checkout): pyarrow and
dask.distributed, imported only through here so that a missing one is a one-line usage
error (exit 2) naming the extra, never an ImportError, and `pip install .` alone keeps
working for every other command (tests/project/test_packaging.py checks the declared imports)."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import cast

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


#: what the command's process imports pyarrow without: numpy, and the remote file systems
#: pyarrow.parquet's import of pyarrow.fs loads when they are there (S3, GCS, Azure, HDFS:
#: 3.4 MB of summed PSS, libarrow_s3 among them; a survey reads and writes local files)
_NOT_NEEDED = ("numpy", "pyarrow._s3fs", "pyarrow._gcsfs", "pyarrow._azurefs", "pyarrow._hdfs")


def parquet_without_numpy() -> ModuleType:
    """pyarrow.parquet imported without numpy, for a command's own process (`survey`
    writes and reads Parquet through pyarrow's own types, never numpy arrays): numpy and the
    BLAS under it are 23 MB and 0.09 s of CPU of pyarrow's import, and optional to pyarrow
    (>= 16); nor the remote file systems (`_NOT_NEEDED`). Where numpy or pyarrow is
    imported already (the Python API in a user's process) nothing changes; numpy can still
    be imported afterwards, only pyarrow does not use it. Only for the command's process:
    it changes pyarrow for the whole process."""
    if "pyarrow" in sys.modules or "numpy" in sys.modules:
        return parquet()
    # and, unless the user chose, the C library's allocator rather than jemalloc, whose
    # arenas are 6 MB of a survey's main process (tables of one shard's rows at a time);
    # read at pyarrow's import (set_memory_pool afterwards does not spare the arenas)
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    modules = cast("dict[str, object]", sys.modules)
    for name in _NOT_NEEDED:
        modules[name] = None        # "import numpy" fails (pyarrow.fs skips the others)
    try:
        return parquet()
    finally:
        for name in _NOT_NEEDED:
            del sys.modules[name]


def pyarrow_json() -> ModuleType:
    """pyarrow.json (the survey's rows become a table through its reader)."""
    return _module("pyarrow.json", "survey files are Parquet")


def has_pyarrow() -> bool:
    """Whether pyarrow is installed, without importing it (its import costs 0.1 s and 34 to
    38 MB: a survey writes its Parquet files once its workers are done): a package named
    pyarrow is found on the path (a module of that name that is no package is not it)."""
    import importlib.util
    spec = importlib.util.find_spec("pyarrow")
    return spec is not None and bool(spec.submodule_search_locations)


def distributed() -> ModuleType:
    """dask.distributed (raises UsageError when absent; see `has_distributed`)."""
    return _module("distributed", "--scheduler needs Dask")


def has_distributed() -> bool:
    """Whether dask.distributed is installed (found, not imported: its import alone costs
    0.3 s of CPU and 50 MB)."""
    import importlib.util
    return importlib.util.find_spec("distributed") is not None
