"""The one reader of a file the user names (a policy, a target list, a trust store, a scan
baseline, a folder's client profiles, a survey's manifest): bounded in size, and never
waiting on a named pipe that has no writer.

Each read is `read_bounded` (bytes) or `read_bounded_text` (UTF-8 text); what goes wrong is
one `UnreadableFile`, a usage error (exit 2) whose message is the one line naming the file,
what is wrong and what the file should be:

    --baseline b.json: cannot read it (permission denied)
    policy file /dev/zero: larger than 1 MiB: not a policy (docs/POLICY.md)
    t.txt: not UTF-8 text (byte 0xe9 at offset 10): not a list of HOST[:PORT] lines

The size is read, not stat'ed: a pipe (`--cafile <(cat a.pem b.pem)`) or a device has no
size to ask, and /dev/zero must not be read without end.
"""

from __future__ import annotations

import os
import stat

from tlsprobe.errors import UsageError, os_error_text

__all__ = ["PIPE_WRITER_WAIT", "UnreadableFile", "read_bounded", "read_bounded_text"]

#: seconds a named pipe is waited for a writer (open() of a FIFO waits for one without end:
#: a FIFO left in a folder of profiles, or a name mistyped, hung the command)
PIPE_WRITER_WAIT = 3.0


class UnreadableFile(UsageError):
    """A file that cannot serve: not readable, over its size limit, not UTF-8, or a named
    pipe with no writer. `name` is the file as the message names it ("policy file
    p.json", "--baseline b.json"), `reason` what is wrong with it; str() is the whole line."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason

    @classmethod
    def too_large(cls, name: str, limit: int, expected: str) -> UnreadableFile:
        """The error of a file larger than `limit` bytes: so large, it is not `expected`."""
        size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
        return cls(name, f"larger than {size}: not {expected}")


def read_bounded(path: str | os.PathLike[str], limit: int, expected: str,
                 name: str | None = None) -> bytes:
    """The bytes of `path`, at most `limit` of them (more is an UnreadableFile saying that
    the file is not `expected`, "a trust store"). `name`: the file as the message names it
    (default: its path). A named pipe is read once, to its end, when a program writes to it
    (`<(cat a.pem)`, or a writer started before or up to PIPE_WRITER_WAIT seconds after);
    one without a writer is an error then, not a wait without end."""
    label = os.fspath(path) if name is None else name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UnreadableFile(label, f"cannot read it ({os_error_text(exc)})") from None
    try:
        first = _first_of_pipe(fd, label) if stat.S_ISFIFO(os.fstat(fd).st_mode) else b""
        os.set_blocking(fd, True)      # a device's reads (a tty's) wait as usual
        data = first + _read_at_most(fd, limit + 1 - len(first))
    except OSError as exc:
        raise UnreadableFile(label, f"cannot read it ({os_error_text(exc)})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnreadableFile.too_large(label, limit, expected)
    return data


def _first_of_pipe(fd: int, label: str) -> bytes:
    """What a named pipe holds now (b"": its writer is there and has not written yet, or
    came and went writing nothing), or, when no program opens it for writing within
    PIPE_WRITER_WAIT seconds, the error of a pipe without a writer."""
    import select
    import time
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    end, woke = time.monotonic() + PIPE_WRITER_WAIT, False
    while True:
        try:
            first = os.read(fd, 1 << 16)
        except BlockingIOError:
            return b""          # a writer, no data yet: the blocking read waits for it
        if first or woke:       # data, or a writer that closed it empty (POLLHUP)
            return first
        left = end - time.monotonic()
        if left <= 0:
            raise UnreadableFile(label, f"a named pipe that no program opened for writing in "
                                 f"{PIPE_WRITER_WAIT:g} s: start its writer first, or give "
                                 "a file")
        # Linux wakes a reader that opened without blocking on data or on its first
        # writer's close, not before a writer came: an empty poll is no writer yet
        woke = bool(poller.poll(left * 1000))


def _read_at_most(fd: int, size: int) -> bytes:
    """Up to `size` bytes of `fd`, to its end (a pipe gives them in pieces)."""
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, min(size, 1 << 20))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_bounded_text(path: str | os.PathLike[str], limit: int, expected: str,
                      name: str | None = None) -> str:
    """`read_bounded`, decoded as UTF-8 (a byte-order mark kept); bytes that are not UTF-8
    are an UnreadableFile naming the first and its offset."""
    raw = read_bounded(path, limit, expected, name)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        label = os.fspath(path) if name is None else name
        raise UnreadableFile(label, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                             f"{exc.start}): not {expected}") from None
