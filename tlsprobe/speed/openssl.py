"""Run `openssl speed` on the same machine in the same run, read its tables, compare.

Public-key primitives it knows go on one command line
(`openssl speed -elapsed -seconds N ecdhx25519 rsa2048 ...`); a name this build does not
know is dropped and the command re-run; one the `openssl version` says it is too old for
(ML-KEM and ML-DSA before OpenSSL 3.5, `OpensslSpec.since`) is not asked at all. AEADs are run
as `openssl speed -elapsed -seconds N -evp CIPHER -aead -bytes SIZE`, the TLS-like sequence
(IV, 13-byte AAD, encrypt, tag) our AEAD benchmark times, once per block size.
`-elapsed` makes openssl divide by wall-clock time, as our harness does; `-seconds` only
takes whole seconds, so it gets max(1, round(seconds)). With --multi N it gets `-multi N`.

Its tables are read by their headers, not by position: a header line names the columns
(`sign    verify    sign/s verify/s`), each row ends with one number per column and starts
with a label (`rsa 2048 bits`, ` 253 bits ecdh (X25519)`), which is what `OpensslSpec.row`
matches. That survives the layout changes between OpenSSL versions (3.5 added keygen/encaps
columns). Cipher tables (`type 16 bytes ...`) give 1000s of bytes per second with a `k`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tlsprobe.errors import os_error_text
from tlsprobe.model.speed import AlgorithmResult, Comparison, ComparisonRow, Figure
from tlsprobe.speed.base import Algorithm

_UNKNOWN = re.compile(r"Unknown algorithm (\S+)")
_NUMBER = re.compile(r"^(\d+(?:\.\d+)?)(s|k)?$")


@dataclass(frozen=True)
class SpeedRow:
    """One row of an `openssl speed` public-key table: label and column header -> value."""

    label: str
    values: dict[str, float]


class OpensslUnusable(ValueError):
    """An explicitly named openssl binary is missing, not executable, or not openssl."""


# What `openssl version` prints first for the builds whose `speed` output we read.
_VERSION_PREFIXES = ("OpenSSL ", "LibreSSL ")


def find_binary(path: str | None = None) -> str | None:
    """Absolute path of the openssl binary (`path` or `openssl` on PATH), None if absent."""
    return shutil.which(path or "openssl")


def binary_version(binary: str) -> str:
    """`openssl version` of that binary (one line)."""
    done = run_openssl([binary, "version"], 30)
    return (done.stdout.strip().splitlines() or ["unknown version"])[0]


def version_number(version: str) -> tuple[int, int] | None:
    """(major, minor) of an `openssl version` line "OpenSSL 3.0.22 ..."; None for LibreSSL or
    anything else, whose numbers do not say which OpenSSL features it has."""
    match = re.match(r"OpenSSL (\d+)\.(\d+)", version)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def check_binary(path: str) -> tuple[str, str]:
    """(absolute path, `openssl version` line) of a binary named with --openssl.

    Raises `OpensslUnusable` with a one-line reason: no such file, not executable, or a
    program that does not answer `version` like openssl (`/bin/true` would otherwise run
    and leave every comparison row empty).
    """
    if os.sep in path or (os.altsep and os.altsep in path):
        if not os.path.exists(path):
            raise OpensslUnusable(f"--openssl {path}: no such file")
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise OpensslUnusable(f"--openssl {path}: not an executable file")
        resolved = os.path.abspath(path)
    else:
        found = shutil.which(path)
        if found is None:
            raise OpensslUnusable(f"--openssl {path}: no such file on PATH")
        resolved = found
    try:
        done = subprocess.run([resolved, "version"], capture_output=True, text=True,
                              timeout=10, check=False, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise OpensslUnusable(f"--openssl {path}: cannot run it: {os_error_text(exc)}") from None
    except subprocess.TimeoutExpired:
        raise OpensslUnusable(f"--openssl {path}: `{path} version` did not answer in 10 s; "
                              "not openssl") from None
    first = _first_line(done.stdout)
    if done.returncode != 0 or not first.startswith(_VERSION_PREFIXES):
        said = f"printed {first[:60]!r}" if first else "printed nothing"
        raise OpensslUnusable(f"--openssl {path}: not openssl (`{os.path.basename(path)} "
                              f"version` {said})")
    return resolved, first


def _number(token: str) -> float | None:
    match = _NUMBER.match(token)
    if not match:
        return None
    value = float(match.group(1))
    return value * 1000 if match.group(2) == "k" else value


def parse_tables(text: str) -> list[SpeedRow]:
    """Rows of every public-key table in `openssl speed` output (machine lines ignored)."""
    rows: list[SpeedRow] = []
    header: list[str] = []
    for line in text.splitlines():
        tokens = line.split()
        if not tokens or line.startswith("+") or tokens[0] == "type":
            continue
        if any(t.endswith("/s") for t in tokens) and all(_number(t) is None for t in tokens):
            header = tokens
            continue
        if not header or len(tokens) <= len(header):
            continue
        values = [_number(t) for t in tokens[-len(header):]]
        if any(v is None for v in values):
            continue
        label = line.rstrip()
        for token in reversed(tokens[-len(header):]):
            label = label[:label.rindex(token)]
        rows.append(SpeedRow(label.strip(), {h: v for h, v in zip(header, values)
                                             if v is not None}))
    return rows


# The block sizes in openssl's machine-readable form ("+H:16:64"): with -multi its children
# send it ("Got: +H:16 from 0") and the summed rows follow without a "type ... bytes" header.
_MACHINE_SIZES = re.compile(r"^(?:Got: )?\+H((?::\d+)+)(?: from \d+)?$")


def parse_cipher_table(text: str) -> dict[str, dict[int, float]]:
    """Cipher rows of `openssl speed -evp` output: name -> block size -> bytes per second
    (the sizes from the "type" header or, with -multi, from the children's "+H" lines)."""
    table: dict[str, dict[int, float]] = {}
    sizes: list[int] = []
    for line in text.splitlines():
        tokens = line.split()
        machine = _MACHINE_SIZES.match(line.strip())
        if machine:
            sizes = [int(t) for t in machine.group(1).split(":")[1:]]
            continue
        if not tokens or line.startswith("+") or tokens[0] == "Got:":
            continue
        if tokens[0] == "type" and tokens[2::2] == ["bytes"] * (len(tokens) // 2):
            sizes = [int(t) for t in tokens[1::2] if t.isdigit()]
            continue
        if sizes and len(tokens) == len(sizes) + 1:
            values = [_number(t) for t in tokens[1:]]
            if all(v is not None for v in values):
                table[tokens[0]] = {size: v for size, v in zip(sizes, values) if v is not None}
    return table


def _find_row(rows: Sequence[SpeedRow], pattern: str) -> SpeedRow | None:
    regex = re.compile(pattern)
    return next((row for row in rows if regex.search(row.label)), None)


class _Runner:
    """Runs `openssl speed` commands and remembers their command lines."""

    def __init__(self, binary: str, seconds: int, processes: int) -> None:
        self.binary = binary
        self.seconds = seconds
        self.processes = processes
        self.commands: list[str] = []

    def speed(self, args: list[str], tests: int) -> subprocess.CompletedProcess[str]:
        argv = [self.binary, "speed", "-elapsed", "-seconds", str(self.seconds)]
        if self.processes > 1:
            argv += ["-multi", str(self.processes)]
        argv += args
        self.commands.append(" ".join(["openssl", *argv[1:]]))
        return run_openssl(argv, 60 + tests * self.seconds * 2)


def run_openssl(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run openssl; a binary that cannot be run or does not finish in `timeout` seconds is
    a failed run (exit status -1, the reason as its stderr), never an exception that
    would throw away the figures measured before.

    openssl runs in a session of its own, ended as a whole (SIGKILL to its process group)
    and waited for when it times out or Ctrl-C stops us: `speed -multi` forks children,
    which killing the parent alone would leave running."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as exc:
        return subprocess.CompletedProcess(argv, -1, "", f"cannot run {argv[0]}: "
                                                         f"{os_error_text(exc)}")
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end(proc)
        return subprocess.CompletedProcess(argv, -1, "", f"`openssl {argv[1]}` did not "
                                                         f"finish in {timeout:g} s")
    except BaseException:   # Ctrl-C: openssl ends with us
        _end(proc)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _end(proc: subprocess.Popen[str]) -> None:
    """Kill openssl's whole process group (its -multi children too) and reap it."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()   # a no-op once the group is gone
    proc.communicate()


def _public_key_rows(runner: _Runner, names: list[str]) -> tuple[list[SpeedRow], set[str], str]:
    """Run the public-key names; returns (rows, names openssl refused, error or "")."""
    refused: set[str] = set()
    while names:
        done = runner.speed(names, tests=2 * len(names))
        unknown = _UNKNOWN.search(done.stdout + done.stderr)
        if done.returncode != 0 and unknown and unknown.group(1) in names:
            refused.add(unknown.group(1))
            names = [n for n in names if n != unknown.group(1)]
            continue
        if done.returncode != 0:
            return [], refused, _first_line(done.stderr) or f"exit status {done.returncode}"
        return parse_tables(done.stdout), refused, ""
    return [], refused, ""


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def compare(algorithms: Sequence[Algorithm], results: Sequence[AlgorithmResult], *,
            seconds: float, processes: int = 1, binary: str | None = None,
            progress: Callable[[str], None] | None = None) -> Comparison:
    """Run `openssl speed` for what it knows of `algorithms` and pair it with `results`."""
    openssl_seconds = max(1, round(seconds))
    if binary is not None:  # named explicitly: it must be openssl (the CLI checked it first)
        try:
            path, version = check_binary(binary)
        except OpensslUnusable as exc:
            return Comparison(None, None, openssl_seconds, error=f"{exc}; comparison skipped")
    else:
        found = find_binary()
        if found is None:
            return Comparison(None, None, openssl_seconds,
                              error="no openssl binary found (openssl not on PATH); "
                                    "comparison skipped")
        path, version = found, binary_version(found)
    runner = _Runner(path, openssl_seconds, processes)
    say = progress or (lambda label: None)
    measured = {r.algorithm: r for r in results}
    chosen = [a for a in algorithms if a.name in measured]
    # Too old for it (ML-KEM before 3.5): not run at all, said in the row note.
    too_old = {a.name: reason for a in chosen if a.openssl
               and (reason := a.openssl.missing_in(version_number(version))) is not None}

    names = [n for a in chosen if a.openssl and a.openssl.cipher is None
             and a.name not in too_old for n in a.openssl.names]
    say(f"openssl speed {' '.join(names)}" if names else "openssl speed")
    rows, refused, error = _public_key_rows(runner, list(dict.fromkeys(names)))

    cipher_tables: dict[tuple[str, int], dict[str, dict[int, float]] | str] = {}
    for algorithm in chosen:
        spec = algorithm.openssl
        if spec is None or spec.cipher is None:
            continue
        for fig in measured[algorithm.name].figures:
            size = fig.block_size or 0
            say(f"openssl speed -evp {spec.cipher} -aead -bytes {size}")
            done = runner.speed(["-evp", spec.cipher, "-aead", "-bytes", str(size)], tests=1)
            cipher_tables[(algorithm.name, size)] = (
                parse_cipher_table(done.stdout) if done.returncode == 0
                else _first_line(done.stderr) or f"exit status {done.returncode}")

    out: list[ComparisonRow] = []
    for algorithm in chosen:
        for fig in measured[algorithm.name].figures:
            if algorithm.name in too_old:
                out.append(_with_note(ComparisonRow(algorithm.name, fig.operation,
                                                    fig.block_size, "op/s", fig.per_second,
                                                    None), too_old[algorithm.name]))
            else:
                out.append(_row(algorithm, fig, rows, refused, error, cipher_tables))
    return Comparison(path, version, openssl_seconds, tuple(out), tuple(runner.commands))


def _row(algorithm: Algorithm, fig: Figure, rows: list[SpeedRow], refused: set[str], error: str,
         cipher_tables: dict[tuple[str, int], dict[str, dict[int, float]] | str]
         ) -> ComparisonRow:
    spec = algorithm.openssl
    if fig.block_size is not None:
        base = ComparisonRow(algorithm.name, fig.operation, fig.block_size, "bytes/s",
                             fig.bytes_per_second or 0.0, None)
        table = cipher_tables.get((algorithm.name, fig.block_size))
        if spec is None or table is None:
            return _with_note(base, "no openssl speed equivalent")
        if isinstance(table, str):
            return _with_note(base, f"openssl speed failed: {table}")
        for name, values in table.items():
            if name.lower() == spec.row.lower() and fig.block_size in values:
                return _with_value(base, values[fig.block_size])
        return _with_note(base, "not in openssl speed output")
    base = ComparisonRow(algorithm.name, fig.operation, None, "op/s", fig.per_second, None)
    if spec is None:
        return _with_note(base, "no openssl speed equivalent")
    if spec.names and all(n in refused for n in spec.names):
        return _with_note(base, "unknown to this openssl speed")
    if error:
        return _with_note(base, f"openssl speed failed: {error}")
    row = _find_row(rows, spec.row)
    if row is None:
        return _with_note(base, "not in openssl speed output")
    for header in spec.column_headers(fig.operation):
        if header in row.values:
            return _with_value(base, row.values[header])
    return _with_note(base, f"openssl speed does not report {fig.operation}")


def _with_note(row: ComparisonRow, note: str) -> ComparisonRow:
    return ComparisonRow(row.algorithm, row.operation, row.block_size, row.unit, row.tlsprobe,
                         None, note)


def _with_value(row: ComparisonRow, value: float) -> ComparisonRow:
    return ComparisonRow(row.algorithm, row.operation, row.block_size, row.unit, row.tlsprobe,
                         value, None)
