"""Preloaded by the fork server the survey's LocalCluster workers are forked from.

Importing it makes the fork server ignore SIGINT before multiprocessing records the handlers
its children start with (forkserver.main reads them after the preloads), so every worker
it forks, also one a nanny restarts later, ignores Ctrl-C: a terminal sends it to the whole
foreground process group, and only the survey's main process is to act on it.
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
