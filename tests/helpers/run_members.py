"""Outputs of two runs compared without what differs by run: the run members every JSON
document carries (`tlsprobe_version` aside, `started_at` and `duration_s`: when the run
started and how long it took), dropped from each JSON line that has them."""
from __future__ import annotations

import json

RUN_MEMBERS = ("started_at", "duration_s")


def without_run_members(text: str) -> str:
    """`text` with the run members removed from each line that is a JSON object holding
    them (other lines as they are)."""
    out = []
    for line in text.splitlines(keepends=True):
        try:
            doc = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(doc, dict) and any(m in doc for m in RUN_MEMBERS):
            for m in RUN_MEMBERS:
                doc.pop(m, None)
            out.append(json.dumps(doc) + ("\n" if line.endswith("\n") else ""))
        else:
            out.append(line)
    return "".join(out)
