"""Preloaded by the fork server that a survey's replacement local workers are forked from
(survey/local.py: a worker started once this process runs threads, its thread worker among them).

Importing it makes the fork server ignore SIGINT before multiprocessing records the handlers
its children start with (forkserver.main reads them after the preloads), so every worker
it forks ignores Ctrl-C: a terminal sends it to the whole
foreground process group, and only the survey's main process is to act on it.
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
