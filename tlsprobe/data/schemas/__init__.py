"""The JSON Schemas (draft 2020-12) of tlsprobe's JSON outputs, shipped with the package.

`path("scan")` is the file of `tlsprobe scan --json`'s lines; `load(name)` its parsed
content. NAMES lists them: probe (`tlsprobe HOST --json`), scan (`scan --json` and a
survey's shard-NNNNN.jsonl), clients (`clients --json`), pcap-connection (`pcap --jsonl`
records), survey-row (a survey's Parquet rows), pcap (`pcap --json`'s document), timing
(`tlsprobe timing HOST --json`), speed (`tlsprobe speed --json`), scan-comparison (the last line of
`scan --quic --compare-tcp --json`), survey-summary (`survey summary DIR --json`),
survey-diff (`survey diff OLD NEW --jsonl` records), speed-list (`speed --list --json`),
client-profile (`clients --list --json` lines, the profile files), policy-list
(`scan --list-policies --json` lines). The files are generated from the model by
tools/gen_schemas.py (never edited by hand); docs/SCHEMAS.md says how to validate.
"""

from __future__ import annotations

import json
from pathlib import Path

NAMES = ("probe", "scan", "clients", "pcap-connection", "survey-row", "pcap", "timing",
         "speed", "scan-comparison", "survey-summary", "survey-diff",
         "speed-list", "client-profile", "policy-list")


def path(name: str) -> Path:
    """The schema file of the output `name` (one of NAMES)."""
    if name not in NAMES:
        raise ValueError(f"no schema named {name!r}: one of {', '.join(NAMES)}")
    return Path(__file__).with_name(f"{name}.schema.json")


def load(name: str) -> dict[str, object]:
    """The schema of the output `name`, parsed (a JSON object)."""
    schema: dict[str, object] = json.loads(path(name).read_text(encoding="utf-8"))
    return schema


__all__ = ["NAMES", "load", "path"]
