"""rich's Console for every renderer, with one change: a closed stdout (`tlsprobe scan HOST
| head -1`) raises BrokenPipeError, which cli.py handles for every command (exit 141, quiet),
instead of rich's own `SystemExit(1)`, the exit code that means "findings failed the gate"."""

from __future__ import annotations

from rich.console import Console as _RichConsole

__all__ = ["Console"]


class Console(_RichConsole):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError("stdout closed")
