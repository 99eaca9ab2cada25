"""A page's layout as headless Chromium renders it at a given window width: the document's
scroll width against the window's, read by a script appended to a copy of the page (the page
itself stays script-free), through `--dump-dom`."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from tests.helpers.servers import peer_unavailable

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")
_PROBE = ("<script>document.body.insertAdjacentHTML('beforeend', '<pre id=tlsprobe-layout>' + "
          "JSON.stringify({scrollWidth: document.documentElement.scrollWidth, "
          "innerWidth: window.innerWidth, images: Array.from(document.images).map("
          "i => i.naturalWidth)}) + '</pre>')</script>")


def chromium() -> str:
    """The Chromium binary; a missing browser is the peer-unavailable failure (CI has it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        peer_unavailable("chromium not installed (apt-get install chromium)")
    assert found is not None
    return found


def layout(page: Path, width: int, workdir: Path) -> dict[str, object]:
    """{scrollWidth, innerWidth, images (each <img>'s natural width, 0 if it did not
    load)} of `page` in a `width`-pixel-wide window."""
    workdir.mkdir(parents=True, exist_ok=True)
    copy = workdir / f"layout-{width}.html"
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"),
                    encoding="utf-8")
    done = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={workdir / 'profile'}",
                           f"--window-size={width},1000", "--dump-dom", copy.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="tlsprobe-layout">([^<]*)</pre>', done.stdout)
    assert found, done.stdout[-2000:]
    metrics: dict[str, object] = json.loads(found.group(1))
    return metrics
