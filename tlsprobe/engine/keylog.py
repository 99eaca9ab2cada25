"""SSLKEYLOGFILE lines: write the secrets of our own connections, read other tools' logs.

Format (NSS key log, as written by OpenSSL, NSS, GnuTLS, curl and browsers): one
``<LABEL> <client_random hex> <secret hex>`` per line, ``#`` comments. TLS 1.2 and older
log ``CLIENT_RANDOM`` with the 48-byte master secret; TLS 1.3 logs one line per traffic
secret. The older ``RSA Session-ID:<hex> Master-Key:<hex>`` form (Wireshark's, from
OpenSSL's SSL_SESSION_print) gives a TLS 1.0-1.2 master secret by session id. Parsing is bounded and never raises on bad content: bad lines are counted.

A key log still being written (a browser's SSLKEYLOGFILE while a live capture runs) is
loaded with ``load_keylog(path, grows=True)``: a lookup that misses then looks whether the
file grew (one stat) and reads only the lines added since (`KeyLogFollower`), never the
whole file again.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Protocol, Self, TypeVar

from tlsprobe.engine.keyschedule import KeySchedule

CLIENT_RANDOM = "CLIENT_RANDOM"
CLIENT_EARLY_TRAFFIC_SECRET = "CLIENT_EARLY_TRAFFIC_SECRET"
CLIENT_HANDSHAKE_TRAFFIC_SECRET = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HANDSHAKE_TRAFFIC_SECRET = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_TRAFFIC_SECRET_0 = "CLIENT_TRAFFIC_SECRET_0"
SERVER_TRAFFIC_SECRET_0 = "SERVER_TRAFFIC_SECRET_0"
EARLY_EXPORTER_SECRET = "EARLY_EXPORTER_SECRET"
EXPORTER_SECRET = "EXPORTER_SECRET"

#: Labels we read, with the secret lengths each may have.
LABELS: dict[str, tuple[int, ...]] = {
    CLIENT_RANDOM: (48,),
    CLIENT_EARLY_TRAFFIC_SECRET: (32, 48),
    CLIENT_HANDSHAKE_TRAFFIC_SECRET: (32, 48),
    SERVER_HANDSHAKE_TRAFFIC_SECRET: (32, 48),
    CLIENT_TRAFFIC_SECRET_0: (32, 48),
    SERVER_TRAFFIC_SECRET_0: (32, 48),
    EARLY_EXPORTER_SECRET: (32, 48),
    EXPORTER_SECRET: (32, 48),
}

MAX_LINE = 1024
_V = TypeVar("_V")
DEFAULT_MAX_SESSIONS = 100_000
DEFAULT_MAX_BYTES = 64 << 20
#: bytes of a growing key log read and parsed at a time (a few thousand lines)
FOLLOW_WINDOW = 1 << 20


def format_line(label: str, client_random: bytes, secret: bytes) -> str:
    """One key log line (no newline)."""
    if len(client_random) != 32:
        raise ValueError("client_random must be 32 bytes")
    return f"{label} {client_random.hex()} {secret.hex()}"


def tls12_lines(client_random: bytes, master_secret: bytes) -> list[str]:
    """The CLIENT_RANDOM line of a TLS 1.0-1.2 connection."""
    return [format_line(CLIENT_RANDOM, client_random, master_secret)]


def tls13_lines(client_random: bytes, schedule: KeySchedule) -> list[str]:
    """Lines for every TLS 1.3 secret the schedule has derived so far, in handshake order."""
    pairs = (
        (CLIENT_EARLY_TRAFFIC_SECRET, schedule.client_early_traffic_secret),
        (EARLY_EXPORTER_SECRET, schedule.early_exporter_master_secret),
        (CLIENT_HANDSHAKE_TRAFFIC_SECRET, schedule.client_handshake_traffic_secret),
        (SERVER_HANDSHAKE_TRAFFIC_SECRET, schedule.server_handshake_traffic_secret),
        (CLIENT_TRAFFIC_SECRET_0, schedule.client_application_traffic_secret_0),
        (SERVER_TRAFFIC_SECRET_0, schedule.server_application_traffic_secret_0),
        (EXPORTER_SECRET, schedule.exporter_master_secret),
    )
    return [format_line(label, client_random, secret) for label, secret in pairs
            if secret is not None]


class KeyLogWriter:
    """Appends key log lines to a file (created 0600) or an open text stream, flushing each
    line so a concurrently running Wireshark or a crash loses nothing."""

    def __init__(self, target: str | os.PathLike[str] | IO[str]) -> None:
        if isinstance(target, (str, os.PathLike)):
            fd = os.open(os.fspath(target), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._stream: IO[str] = os.fdopen(fd, "a", encoding="ascii")
            self._owned = True
        else:
            self._stream = target
            self._owned = False

    def write_lines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self._stream.write(line + "\n")
        self._stream.flush()

    def write(self, label: str, client_random: bytes, secret: bytes) -> None:
        self.write_lines([format_line(label, client_random, secret)])

    def close(self) -> None:
        if self._owned:
            self._stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class KeyLogAppender:
    """Key log lines appended to `path` as they come (`__call__`), each once; the file is
    made with the first line. An error opening or writing it is kept in `error`, for the
    caller to report at the end, and never raised into the handshake that gave the lines."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.written: set[str] = set()
        self.error: OSError | None = None
        self._writer: KeyLogWriter | None = None

    def __call__(self, lines: Iterable[str]) -> None:
        new = [line for line in dict.fromkeys(lines) if line not in self.written]
        if not new or self.error is not None:
            return
        try:
            if self._writer is None:
                self._writer = KeyLogWriter(self.path)
            self._writer.write_lines(new)
        except OSError as exc:
            self.error = exc
            return
        self.written.update(new)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


@dataclass
class KeyLog:
    """Parsed key log: secrets by client random, then by label.

    `bad_lines` counts malformed lines (wrong field count, bad hex, wrong lengths);
    `skipped_lines` counts well-formed lines with labels we do not use (RSA premaster
    lines, ECH or later traffic secrets, future labels); `dropped` counts
    lines for new sessions beyond the `max_sessions` bound, and `cut` is set when the
    file was read only to its first `max_bytes` (a finished file: what it holds past its
    limits is not read, and a note says so). A log still being written keeps its newest
    sessions instead: past the bound the oldest are forgotten (`forgotten`), since a live
    capture's next connections need the keys logged last. `session_ids` maps a TLS
    1.0-1.2 session id to its master secret (``RSA Session-ID:`` lines); `source` names
    the file read (for warnings)."""

    sessions: dict[bytes, dict[str, bytes]] = field(default_factory=dict)
    bad_lines: int = 0
    skipped_lines: int = 0
    dropped: int = 0
    session_ids: dict[bytes, bytes] = field(default_factory=dict)
    source: str = ""
    #: reads the lines added to a key log still being written (None: a finished file)
    follower: Follower | None = field(default=None, repr=False, compare=False)
    cut: bool = False
    forgotten: int = 0

    @property
    def grows(self) -> bool:
        """Whether lines added to the file later are read when a key is missing."""
        return self.follower is not None

    def secrets(self, client_random: bytes) -> dict[str, bytes] | None:
        found = self.sessions.get(bytes(client_random))
        if found is None and self.follower is not None and self.follower.read_more(self):
            found = self.sessions.get(bytes(client_random))
        return found

    def master_secret(self, client_random: bytes) -> bytes | None:
        """The TLS 1.0-1.2 master secret for a client random, if logged."""
        entry = self.sessions.get(bytes(client_random))
        return entry.get(CLIENT_RANDOM) if entry else None

    def master_secret_by_session_id(self, session_id: bytes) -> bytes | None:
        """The TLS 1.0-1.2 master secret logged for a session id, if any."""
        if not session_id:
            return None
        found = self.session_ids.get(bytes(session_id))
        if found is None and self.follower is not None and self.follower.read_more(self):
            found = self.session_ids.get(bytes(session_id))
        return found

    def merge(self, other: KeyLog) -> None:
        """Add `other`'s keys and counts to this log (within `DEFAULT_MAX_SESSIONS`: a
        finished log drops the sessions past it, a growing one forgets its oldest)."""
        self.bad_lines += other.bad_lines
        self.skipped_lines += other.skipped_lines
        self.dropped += other.dropped
        for random, secrets in other.sessions.items():
            entry = self.sessions.get(random)
            if entry is None and not self._room(self.sessions):
                self.dropped += 1
                continue
            self.sessions.setdefault(random, {}).update(secrets)
        for session_id, secret in other.session_ids.items():
            if session_id in self.session_ids or self._room(self.session_ids):
                self.session_ids[session_id] = secret
            else:
                self.dropped += 1

    def _room(self, table: dict[bytes, _V]) -> bool:
        """Whether `table` can take one more session: below the bound, or a growing log
        that forgets its oldest one (dicts keep their insertion order) to make room."""
        if len(table) < DEFAULT_MAX_SESSIONS:
            return True
        if self.follower is None:
            return False
        del table[next(iter(table))]
        self.forgotten += 1
        return True

    @property
    def usable(self) -> int:
        """Connections (client randoms and session ids) the log has keys for."""
        return len(self.sessions) + len(self.session_ids)

    def __len__(self) -> int:
        return len(self.sessions)


UTF8_BOM = b"\xef\xbb\xbf"
#: the byte-order mark as text: decoded as UTF-8, or as ASCII with replacement characters
BOM_READINGS = "\ufeff\ufffd"


def parse_keylog(lines: Iterable[str] | str,
                 max_sessions: int = DEFAULT_MAX_SESSIONS) -> KeyLog:
    """Parse key log text (a string or an iterable of lines); never raises on bad content."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    log = KeyLog()
    for number, raw in enumerate(lines):
        # a byte-order mark before the first line (an editor's or PowerShell's UTF-8), as
        # the ASCII reading of a file or a capture's embedded key log shows it
        line = raw.strip() if number else raw.lstrip(BOM_READINGS).strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("RSA Session-ID:"):
            pair = _parse_session_id_line(line)
            if pair is None:
                log.bad_lines += 1
            elif pair[0] in log.session_ids or len(log.session_ids) < max_sessions:
                log.session_ids[pair[0]] = pair[1]
            else:
                log.dropped += 1
            continue
        parsed = _parse_line(line)
        if parsed is None:
            log.bad_lines += 1
            continue
        label, client_random, secret = parsed
        if label not in LABELS:
            log.skipped_lines += 1
            continue
        entry = log.sessions.get(client_random)
        if entry is None:
            if len(log.sessions) >= max_sessions:
                log.dropped += 1
                continue
            entry = log.sessions[client_random] = {}
        entry[label] = secret
    return log


def load_keylog(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES,
                max_sessions: int = DEFAULT_MAX_SESSIONS, *, grows: bool = False) -> KeyLog:
    """Read and parse a key log file, at most `max_bytes` of it (the rest counts as dropped,
    and `cut` is set).
    `grows`: the file is still being written: lines added later are read when a lookup
    misses (`KeyLogFollower`; a regular file only: a pipe is read to its end here, and
    `keylog_pipe.load_growing_keylog` follows it without waiting for its writer).

    OSError propagates (the caller turns it into a one-line usage error)."""
    if grows and stat.S_ISREG(os.stat(path).st_mode):
        log = KeyLog(source=os.fspath(path))
        log.follower = KeyLogFollower(os.fspath(path))
        log.follower.read_more(log, force=True)
        return log
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    truncated = len(data) > max_bytes
    text = data[:max_bytes].removeprefix(UTF8_BOM).decode("ascii", errors="replace")
    lines = text.splitlines()
    if truncated and lines and not text.endswith(("\n", "\r")):
        lines.pop()  # the cut-off last line
    log = parse_keylog(lines, max_sessions)
    log.source = os.fspath(path)
    if truncated:
        log.dropped += 1
        log.cut = True
    return log


class Follower(Protocol):
    """What reads the lines added to a key log still being written."""

    def read_more(self, log: KeyLog, force: bool = False) -> bool: ...


class KeyLogFollower:
    """Reads what was added to a key log file since the last look: `read_more` costs one
    stat when the file has not changed, and reads only the new whole lines when it has (a
    line still being written is read once whole). A file that got shorter (rewritten) is
    read again from its start; the keys already read stay. The new bytes are read
    `FOLLOW_WINDOW` at a time, with no limit in all: a browser's log passes 64 MiB in a long
    live capture, and the keys it logs then are the ones needed (the sessions kept are
    bounded by `KeyLog.merge`). A line longer than `MAX_LINE` is skipped, as it is bad."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0          # bytes of whole lines read
        self.size = -1           # the file's size at the last look
        self.reads = 0           # times new lines were read (for tests and --stats)

    def read_more(self, log: KeyLog, force: bool = False) -> bool:
        """Add the file's new lines to `log`; True when there were any."""
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return False       # gone for now: the keys read so far stay
        if size == self.size and not force:
            return False
        self.size = size
        if size < self.offset:
            self.offset = 0
        added = False
        try:
            with open(self.path, "rb") as f:
                while self.offset < size:
                    f.seek(self.offset)
                    data = f.read(min(size - self.offset, FOLLOW_WINDOW))
                    end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
                    if not end:
                        if len(data) < FOLLOW_WINDOW:
                            break      # no whole line yet
                        end = len(data)   # one line longer than the window: bad, skipped
                        log.bad_lines += 1
                    else:
                        log.merge(parse_keylog(data[:end].decode("ascii", errors="replace")))
                        added = True
                    self.offset += end
        except OSError:
            pass
        self.reads += added
        return added


def _parse_line(line: str) -> tuple[str, bytes, bytes] | None:
    """(label, client_random, secret), or None when malformed. Lengths are checked for the
    labels we use; other labels only need three fields of hex."""
    if len(line) > MAX_LINE:
        return None
    fields = line.split()
    if len(fields) != 3:
        return None
    label, random_hex, secret_hex = fields
    try:
        client_random = bytes.fromhex(random_hex)
        secret = bytes.fromhex(secret_hex)
    except ValueError:
        return None
    lengths = LABELS.get(label)
    if lengths is not None and (len(client_random) != 32 or len(secret) not in lengths):
        return None
    return label, client_random, secret


def _parse_session_id_line(line: str) -> tuple[bytes, bytes] | None:
    """(session id, master secret) of ``RSA Session-ID:<hex> Master-Key:<hex>``, or None."""
    fields = line.split()
    if len(line) > MAX_LINE or len(fields) != 3 or not fields[2].startswith("Master-Key:"):
        return None
    _, _, sid_hex = fields[1].partition(":")
    _, _, master_hex = fields[2].partition(":")
    try:
        session_id, master = bytes.fromhex(sid_hex), bytes.fromhex(master_hex)
    except ValueError:
        return None
    if not 1 <= len(session_id) <= 32 or len(master) != 48:
        return None
    return session_id, master
