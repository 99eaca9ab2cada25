"""The examples README.md shows, run: what a first user types (adapted to loopback servers
and the repository's captures) prints what the README says it prints.

Each example block is `$ tlsprobe ...` followed by its output. The output is compared line
by line after the same normalisation on both sides: runs of spaces are one space, blank
lines and table rules (`────`) are left out, and values that differ from run to run (ports,
times, dates, serials and fingerprints, speed figures) are masked. A line `...` in the
README stands for any number of lines. The README's Python example runs as written, with the
target and the interface replaced.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.servers import accepting, is_listening

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RULE = re.compile(r"^[─━\s]+$")


def example(command: str, path: Path = README) -> list[str]:
    """The output lines the document shows under `$ tlsprobe COMMAND` (to the end of the
    block or the next `$ ` line)."""
    lines = path.read_text().split("\n")
    start = lines.index(f"$ tlsprobe {command}") + 1
    end = start
    while end < len(lines) and not lines[end].startswith(("```", "$ ")):
        end += 1
    return lines[start:end]


def shape(lines: list[str], mask: Callable[[str], str]) -> list[str]:
    return [mask(" ".join(line.split())) for line in lines
            if line.strip() and not RULE.match(line)]


def mismatch(shown: list[str], printed: list[str]) -> str | None:
    """Where `printed` departs from `shown` (a `...` of `shown` matches any lines)."""
    i, skipping = 0, False
    for line in shown:
        if line == "...":
            skipping = True
            continue
        if skipping:
            while i < len(printed) and printed[i] != line:
                i += 1
        if i >= len(printed) or printed[i] != line:
            got = printed[i] if i < len(printed) else "(nothing more)"
            return f"the README shows {line!r}, tlsprobe printed {got!r}"
        i, skipping = i + 1, False
    if not skipping and i < len(printed):
        return f"tlsprobe printed {printed[i]!r} after what the README shows"
    return None


def check(command: str, printed: str, mask: Callable[[str], str] = lambda s: s) -> None:
    problem = mismatch(shape(example(command), mask), shape(printed.split("\n"), mask))
    assert problem is None, f"README.md, `$ tlsprobe {command}`: {problem}\n{printed}"


def test_the_comparison_finds_what_it_looks_for() -> None:
    assert mismatch(["a", "...", "d"], ["a", "b", "c", "d"]) is None
    assert mismatch(["a", "c"], ["a", "b", "c"]) == \
        "the README shows 'c', tlsprobe printed 'b'"
    assert mismatch(["a"], ["a", "b"]) == "tlsprobe printed 'b' after what the README shows"
    assert shape(["x   y ", "", "────"], str) == ["x y"]
    assert example("pcap captures/tls12_x25519.pcap")[0].startswith("#  Client")


def test_the_pcap_example(run_cli: Callable[..., Any]) -> None:
    """The capture is the repository's: the output is the README's, byte for byte but for
    spacing (the README once lacked the Key S/C legend line)."""
    result = run_cli("pcap", ROOT / "captures" / "tls12_x25519.pcap")
    assert result.returncode == 0, result.stderr
    check("pcap captures/tls12_x25519.pcap", result.stdout)


def _speed_mask(line: str) -> str:
    line = re.sub(r"(speed:).*", r"\1 VERSIONS", line)
    line = re.sub(r"[█▏▎▍▌▋▊▉]+", "", line)
    return " ".join(re.sub(r"\d+(\.\d+)?[ks]?", "N", line).split())


def test_the_speed_example(run_cli: Callable[..., Any]) -> None:
    """The same algorithms, figures masked (and timed shorter): the README once lacked the
    two lines that head every run (versions; seconds per figure and processes)."""
    command = "speed x25519 p256 aes-128-gcm chacha20-poly1305"
    result = run_cli(*command.split()[:5], "--seconds", "0.01", timeout=120)
    assert result.returncode == 0, result.stderr
    check(command, result.stdout, _speed_mask)


def _probe_mask(line: str) -> str:
    line = re.sub(r"\b[0-9A-F]{2}(:[0-9A-F]{2}){19,}\b", "FINGERPRINT", line)
    line = re.sub(r"\bserial [0-9a-f]+\b", "serial HEX", line)
    return re.sub(r"\d+(\.\d+)?", "N", line)


@pytest.fixture(scope="module")
def self_signed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The README's probe example's server: openssl s_server on X25519 with a self-signed
    RSA-2048 certificate for localhost."""
    wd = tmp_path_factory.mktemp("readme-probe")
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                           "-days", "2", "-subj", "/CN=localhost", "-addext",
                           "subjectAltName=DNS:localhost", "-keyout", "key.pem", "-out",
                           "cert.pem"], check=False, capture_output=True, text=True, cwd=wd)
    assert made.returncode == 0, made.stderr
    for _ in range(3):   # a free port can be taken between probing and binding it
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        with open(wd / "server.log", "w") as log:
            proc = subprocess.Popen(
                ["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", "cert.pem",
                 "-key", "key.pem", "-groups", "X25519", "-quiet"],
                # an open stdin: at its end s_server would close the connection itself
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=wd,
                start_new_session=True)
        deadline = time.monotonic() + 20
        while proc.poll() is None and not is_listening(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None and is_listening(port):
            break
        proc.kill()
        proc.wait()
    else:
        pytest.fail(f"openssl s_server did not start: {(wd / 'server.log').read_text()[-500:]}")
    try:
        yield accepting(port)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_probe_example(self_signed_server: int, run_cli: Callable[..., Any]) -> None:
    """Every line of the README's probe, in order, values masked: the README once lacked
    the certificate's serial and fingerprint lines."""
    result = run_cli(f"localhost:{self_signed_server}", "--tls1_2")
    assert result.returncode == 0, result.stderr
    check("localhost:4433 --tls1_2", result.stdout, _probe_mask)


def test_the_group_audit_example(server_cache: Callable[..., Any],
                                 run_cli: Callable[..., Any]) -> None:
    """`scan --checks groups` on the server the README's output comes from (openssl,
    X25519:P-384:ffdhe2048, its own order): the README once showed the TLS 1.2 table
    without its header and without the "Not supported" lines."""
    server = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    result = run_cli("scan", f"127.0.0.1:{server.port}", "--checks", "groups")
    assert result.returncode == 0, result.stderr

    def mask(line: str) -> str:   # counts and times: a loaded machine's retries add some
        line = re.sub(r"^Connections: .*", "Connections: ...", line)
        return re.sub(r"\(\d+ connections?\)", "(N connections)",
                      line.replace(f":{server.port}", ":4433"))
    check("scan 127.0.0.1:4433 --checks groups", result.stdout, mask)


def test_the_python_example(server_cache: Callable[..., Any],
                            capsys: pytest.CaptureFixture[str]) -> None:
    """README's "Python API" block as written, on a loopback server, with `lo` for `eth0`
    and a short capture (docs/API.md's examples run in tests/api/test_api.py)."""
    server = server_cache("openssl", groups="X25519:P-256", proto="both")
    block = README.read_text().split("## Python API", 1)[1].split("```python\n", 1)[1]
    code = block.split("```", 1)[0]
    for shown, here in (("127.0.0.1:4433", f"127.0.0.1:{server.port}"), ('"eth0"', '"lo"'),
                        ("duration=60", "duration=0.5"),
                        ('"captures/', f'"{ROOT / "captures"}/')):
        assert shown in code, f"README's Python example no longer has {shown!r}"
        code = code.replace(shown, here)
    exec(compile(code, "README.md Python example", "exec"), {})
    out = capsys.readouterr().out.split("\n")
    assert out[0].startswith("Codepoint(id=772, hex='0x0304', name='TLS 1.3') Cipher("), out
    assert out[1].startswith("['x25519', 'secp256r1'"), out
    assert out[2].startswith("localhost KeyExchange(kind='ECDHE', source='hello_retry_request'")
