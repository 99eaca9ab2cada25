"""Build the optional compiled fast path for the benchmarks (issue 35).

`build_compiled(into)` builds the wheel `TLSPROBE_COMPILE=1 pip install .` would install
(python -m build --wheel --no-isolation, from a copy of this working tree's sources, with
this environment's mypy, setuptools and wheel) and unpacks it into `into/site`, which the
benchmarks put first on PYTHONPATH (`benchmarks/pcap.py --compiled`, `pcap_conns.py
--compiled`). Alone: ``python3 benchmarks/compiled_tree.py DIR`` builds into DIR/site and
prints that path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in")


def build_compiled(into: Path) -> Path:
    """The unpacked compiled wheel's folder (`into/site`); exits with the build's output
    when the build fails."""
    src, out, site = into / "src", into / "out", into / "site"
    for folder in (src, out, site):
        shutil.rmtree(folder, ignore_errors=True)
    src.mkdir(parents=True)
    for name in SOURCES:
        shutil.copy2(ROOT / name, src / name)
    for folder in ("build_backend", "tlsprobe"):
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    started = time.monotonic()
    cpu = os.times()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                           "--outdir", str(out), str(src)], capture_output=True, text=True,
                          check=False, cwd=into, env={**env, "TLSPROBE_COMPILE": "1"})
    if done.returncode != 0:
        raise SystemExit("the compiled build failed:\n" + (done.stdout + done.stderr)[-3000:])
    after = os.times()
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    modules = sum(1 for p in site.rglob("*.so") if "__mypyc" not in p.name)
    print(f"compiled fast path: {modules} modules built in {time.monotonic() - started:.0f} s "
          f"({after.children_user + after.children_system - cpu.children_user - cpu.children_system:.0f} s CPU), "
          f"{site}")
    return site


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(build_compiled(Path(sys.argv[1]).resolve()))
