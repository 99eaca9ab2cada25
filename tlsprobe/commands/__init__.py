"""Subcommands: each module has `add_arguments(parser)` and `run(args) -> int`."""

from tlsprobe.requests.scan import PROCESSES_PER_CPU, check_process_count

__all__ = ["PROCESSES_PER_CPU", "check_process_count"]
