"""Subcommands: each module has `add_arguments(parser)` and `run(args) -> int`; what they
share with the command line is in common.py, what they ask for is built by tlsprobe/requests/."""
