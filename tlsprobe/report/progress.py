"""Progress displays on stderr (rich): the capture bar of `pcap`, the per-target lines of
`scan` and the figure counter of `speed`. Each is silent unless enabled (stderr a terminal).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, Self

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from tlsprobe.model.audit import AuditReport


class Target(Protocol):
    """What the scan's progress needs of a target (net.tcp.Target)."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def display(self) -> str: ...


class CaptureBar:
    """A rich progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.progress: Progress | None = None
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     DownloadColumn(), TextColumn("{task.fields[packets]} "
                                                                  "packets"),
                                     TimeRemainingColumn(),
                                     console=Console(file=sys.stderr), transient=True)
            self.progress.start()
        self.task: TaskID | None = None

    def start(self, name: str) -> Callable[[int, int | None, int], None] | None:
        """The update callback of a bar for file `name`; None for a stream of unknown size
        (stdin, a pipe) or when there is no bar."""
        if self.progress is None or name == "<stdin>" or not os.path.isfile(name):
            return None
        progress = self.progress
        task = self.task = progress.add_task(os.path.basename(name), total=None, packets=0)

        def update(done: int, total: int | None, packets: int) -> None:
            progress.update(task, completed=done, total=total, packets=packets)
        return update

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


class ScanProgress:
    """A rich progress bar on stderr: one line per target with its connection count."""

    def __init__(self, enabled: bool, targets: Sequence[Target]) -> None:
        self.progress = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 console=Console(file=sys.stderr), transient=True)
        self.tasks = {(t.host, t.port): self.progress.add_task(t.display, total=None)
                      for t in targets}
        self.names = {(t.host, t.port): t.display for t in targets}
        self.count: dict[str, int] = {}

    def connection(self, target: Target, phase: str) -> None:
        if self.progress is not None:
            n = self.count[target.display] = self.count.get(target.display, 0) + 1
            self.progress.update(self.tasks[target.host, target.port],
                                 description=f"{target.display}: {n} connections, {phase}")

    def phase(self, target: Target, phase: str) -> None:
        if self.progress is not None:
            self.progress.advance(self.tasks[target.host, target.port])

    def report(self, report: AuditReport) -> None:
        if self.progress is not None:
            where = self.names[report.host, report.port]
            self.progress.update(self.tasks[report.host, report.port], total=1, completed=1,
                                 description=f"{where}: done, {report.total_connections} "
                                             "connections")


class SpeedDisplay:
    """Progress on stderr with rich, only when stderr is a terminal; silent otherwise.

    The display is refreshed by hand between figures (no refresh thread), so it never
    competes with a measurement for the interpreter.
    """

    def __init__(self, total: int) -> None:
        self._progress = None
        self._task = None
        if not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), console=Console(stderr=True),
                                  auto_refresh=False, transient=True)
        self._task = self._progress.add_task("setting up", total=total)

    def __enter__(self) -> Self:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def figure(self, done: int, total: int, label: str) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=done, total=total,
                                  description=label or "done")
            self._progress.refresh()

    def note(self, label: str) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=label)
            self._progress.refresh()
