#!/usr/bin/env python3
"""openssl s_server accepting TLS 1.3 0-RTT data (-early_data), for the early_data check:
with the default anti-replay protection (a ticket resumes once, so a replayed ClientHello
and its early data are refused) or, with --no-anti-replay, without it (-no_anti_replay:
the same ClientHello and early data are accepted again, the behaviour RFC 8446 section 8
warns about). Used by tests/checks/test_hygiene.py.

s_server refuses -early_data together with -www, and its interactive mode ends when its
standard input does: this wrapper hands it a pipe whose write end it keeps open (and
inherits across the exec), so that s_server serves one connection after another until it
is killed."""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--chain-file", required=True)
ap.add_argument("--key-file", required=True)
ap.add_argument("--openssl", default="openssl")
ap.add_argument("--no-anti-replay", action="store_true")
args = ap.parse_args()
read_end, write_end = os.pipe()
os.set_inheritable(write_end, True)   # held by s_server itself: its stdin never ends
os.dup2(read_end, 0)
argv = [args.openssl, "s_server", "-accept", f"127.0.0.1:{args.port}", "-cert",
        args.chain_file, "-key", args.key_file, "-early_data", "-quiet"]
argv += ["-no_anti_replay"] if args.no_anti_replay else []
os.execvp(argv[0], argv)
