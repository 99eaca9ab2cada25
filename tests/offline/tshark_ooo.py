"""tshark's view of a corpus capture with out-of-order TCP reassembly switched on.

The corpus truth (../shared/captures/truth) was made with tshark's default settings, under
which a ServerHello behind an out-of-order segment is not dissected: such streams have no
server side in the truth. The parity test compares them against the same truth script
(`make_truth.py`, imported read-only from the corpus) run with
`-o tcp.reassemble_out_of_order:TRUE`, on the few files that need it. Results are cached as
JSON in a directory the caller owns (the pytest cache), keyed by file hash and tshark version;
nothing is written into the corpus.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

OOO_ARGS = ["-o", "tcp.reassemble_out_of_order:TRUE"]


def available() -> bool:
    """tshark and capinfos (both used by make_truth.py) are installed."""
    return shutil.which("tshark") is not None and shutil.which("capinfos") is not None


def _tshark_version() -> str:
    out = subprocess.run(["tshark", "-v"], capture_output=True, text=True, check=False)
    return (out.stdout.splitlines() or ["?"])[0]


def _make_truth(corpus: Path) -> Any:
    """The corpus's make_truth.py as a module, without writing bytecode next to it."""
    spec = importlib.util.spec_from_file_location("_corpus_make_truth", corpus / "make_truth.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write
    return module


def tcp_streams(corpus: Path, truth: dict[str, Any], cache: Path) -> dict[int, dict[str, Any]]:
    """tcp.stream -> truth-form stream record (make_truth.py's schema) as tshark sees it
    with out-of-order reassembly; streams without any handshake are absent."""
    key = hashlib.sha256(f"{truth['file']}|{truth.get('sha256')}|{_tshark_version()}"
                         f"|{OOO_ARGS}".encode()).hexdigest()[:32]
    cached = cache / f"{key}.json"
    if cached.is_file():
        result = json.loads(cached.read_text())
    else:
        make_truth = _make_truth(corpus)
        make_truth.EXTRA_DECODE_AS[:] = OOO_ARGS
        result = make_truth.analyse(str(corpus / truth["file"]))
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(cached)
    return {s["stream"]: s for s in result.get("streams", []) if s["transport"] == "tcp"}
