"""Packaged data: well-known DH primes, policy files, client profiles, the JSON Schemas.

`read_text` reads one file through the package's loader (a folder or a zip archive alike),
as `importlib.resources.files(...).read_text()` does, without importing
`importlib.resources` (with pathlib, tempfile and zipfile: about 8 ms of every scan's
start-up, for a file read once).
"""

from __future__ import annotations

import pkgutil

__all__ = ["read_text"]


def read_text(*parts: str) -> str:
    """The UTF-8 text of the packaged file at `parts` (e.g. "policies", "modern.json").
    Raises OSError (FileNotFoundError) when there is none."""
    data = pkgutil.get_data(__name__, "/".join(parts))
    if data is None:    # a loader that cannot read data: none of ours
        raise FileNotFoundError(f"tlsprobe.data: cannot read {'/'.join(parts)}")
    return data.decode("utf-8")
