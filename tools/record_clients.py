#!/usr/bin/env python3
"""Re-record the client profiles of the clients installed here (tlsprobe/data/clients/).

Each recipe (tools/client_recipes.py) runs one real client against a listener of this script
on `https://localhost:PORT/` (a host name, so that the client sends SNI as it does for any
host). The listener reads the TLS record(s) that carry the client's first ClientHello (a
hello may span several records and TCP segments; the read is bounded in size and time),
keeps the handshake message (header included) and the record layer version, and ends the
connection: a client's fallback retry or later connections are not recorded. The client's
process group is then killed. Every client runs in a network namespace of its own with only
the loopback interface (`unshare --net`), so no client reaches any other address.

Each client is recorded twice: the JA4 must agree, and `ja3_stable` says whether JA3 did
(Chromium permutes its extensions). A recording whose JA3 and JA4 equal those of another
profile (the same library sending the same hello) is not a new profile: it is named in the
kept profile's notes instead.

Usage:  python tools/record_clients.py [--only ID ...] [--out DIR] [--check] [--force]
                                      [--list] [--table]
  --only ID   the recipes to run (ids as --list prints them; default: every recipe whose
              client is installed; a client named here that is not installed is a failure)
  --out DIR   where the profiles are written / compared (default tlsprobe/data/clients)
  --check     record once and compare JA4 (and JA3 where stable) with the stored profile;
              exit 1 on a difference, printing which
  --force     rewrite a profile even when the client and its hello did not change
  --list      the recipes; --table: the recorded profiles as a Markdown table
Exit: 0 done; 1 a requested client failed or differs; 2 bad arguments or no network
namespace could be made.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from client_recipes import (
    DOTTED_HOST,
    RECIPES,
    Facts,
    Recipe,
    Run,
    describe,
    platform_name,
    platform_tag,
)

from tlsprobe.model.clients import ClientProfile, ProfileSource, SourceKind
from tlsprobe.probes.clients.profiles import (
    check_profile,
    fingerprints,
    load_profiles,
    profile_to_json,
)
from tlsprobe.registry.lookup import group
from tlsprobe.wire import decode_handshake

DEFAULT_OUT = ROOT / "tlsprobe" / "data" / "clients"
MAX_HELLO = 64 * 1024          # a ClientHello larger than this is not read (post-quantum: ~2 KiB)
MAX_RECORD = 16384 + 2048      # TLSPlaintext.length limit (with TLSCiphertext's slack)
CONNECTION_TIMEOUT = 10.0      # from accept to the whole hello
NETNS_ENV = "RECORD_CLIENTS_NETNS"
TWIN_NOTE = "the same hello (JA3, JA4) is sent by"


class HelloError(Exception):
    """A connection did not carry a readable ClientHello."""


@dataclass(frozen=True)
class Captured:
    """One recorded first ClientHello."""

    hello: bytes
    record_version: int
    ja3: str
    ja4: str


# -- the listener ------------------------------------------------------------------------

class Listener:
    """Listening sockets on 127.0.0.1 and ::1 with the same free port (a client may resolve
    `localhost` to either)."""

    def __init__(self) -> None:
        for _ in range(20):
            v4 = socket.create_server(("127.0.0.1", 0))
            port = v4.getsockname()[1]
            try:
                v6 = socket.create_server(("::1", port), family=socket.AF_INET6)
            except OSError:
                v4.close()
                continue
            self.port, self.socks = port, [v4, v6]
            return
        raise OSError("no port free on both 127.0.0.1 and ::1")

    def close(self) -> None:
        for s in self.socks:
            s.close()

    def wait_hello(self, proc: subprocess.Popen[bytes], deadline: float) -> Captured:
        """The first ClientHello received before `deadline`; HelloError if the client exits
        or the deadline passes first, or no connection carried one."""
        problems = []
        while time.monotonic() < deadline:
            exited = proc.poll() is not None
            ready, _, _ = select.select(self.socks, [], [], 0 if exited else 0.2)
            for s in ready:
                conn, _ = s.accept()
                try:
                    return read_hello(conn, min(deadline, time.monotonic() + CONNECTION_TIMEOUT))
                except HelloError as exc:
                    problems.append(str(exc))
                finally:
                    conn.close()
            if exited and not ready:
                raise HelloError(f"the client exited (status {proc.returncode}) before sending"
                                 " a ClientHello" + (f": {problems[-1]}" if problems else ""))
        raise HelloError("no ClientHello before the deadline"
                         + (f": {problems[-1]}" if problems else ""))


def _read_exact(conn: socket.socket, n: int, deadline: float) -> bytes:
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HelloError("the ClientHello did not arrive whole in time")
        conn.settimeout(left)
        try:
            chunk = conn.recv(n - len(buf))
        except TimeoutError:
            continue
        except OSError as exc:
            raise HelloError(f"reading the hello: {exc}") from None
        if not chunk:
            raise HelloError(f"the client closed the connection after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def read_hello(conn: socket.socket, deadline: float) -> Captured:
    """The ClientHello handshake message carried by the first handshake record(s) of `conn`,
    and the first record's version; bounded by MAX_HELLO bytes and `deadline`."""
    message = b""
    record_version = None
    while True:
        header = _read_exact(conn, 5, deadline)
        ctype, version, length = header[0], int.from_bytes(header[1:3], "big"), \
            int.from_bytes(header[3:5], "big")
        if ctype != 22:
            raise HelloError(f"a record of content type {ctype}, not a handshake record "
                             f"(first bytes {header.hex()})")
        if length == 0 or length > MAX_RECORD:
            raise HelloError(f"a handshake record of length {length}")
        record_version = version if record_version is None else record_version
        message += _read_exact(conn, length, deadline)
        if message[0] != 1:
            raise HelloError(f"handshake message type {message[0]}, not a ClientHello")
        if len(message) >= 4:
            total = 4 + int.from_bytes(message[1:4], "big")
            if total > MAX_HELLO:
                raise HelloError(f"a ClientHello of {total} bytes (limit {MAX_HELLO})")
            if len(message) >= total:
                hello = message[:total]
                try:
                    ja3, ja4 = fingerprints(hello)
                except ValueError as exc:
                    raise HelloError(f"the ClientHello does not decode: {exc}") from None
                return Captured(hello, record_version, ja3, ja4)


# -- running a client --------------------------------------------------------------------

def _session_members(sid: int) -> list[int]:
    """The live (not zombie) processes of session `sid`: a client's children that left its
    process group (browsers start several)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rpartition(")")[2].split()
            except OSError:
                continue
            if len(fields) > 3 and fields[3] == str(sid) and fields[0] != "Z":
                pids.append(int(entry))
    return pids


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the client's process group and what is left of its session, and reap it."""
    for _ in range(3):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _session_members(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.returncode is not None and not _session_members(proc.pid):
            return


def client_env(tmp: Path) -> dict[str, str]:
    """A fresh HOME (no user configuration), the machine's PATH; Go's build cache kept across
    runs so that `go run` does not rebuild net/http each time."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    real_home = Path(os.environ.get("HOME", "/root"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "LANG": "C.UTF-8", "TMPDIR": str(tmp), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache"), "GIT_TERMINAL_PROMPT": "0",
           "GOCACHE": str(real_home / ".cache" / "tlsprobe-record-go"),
           "GOPATH": str(tmp / "gopath"), "GO111MODULE": "off", "GOTOOLCHAIN": "local"}
    for name in ("NODE24",):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _shown(recipe: Recipe, program: str) -> str:
    """The program as the provenance names it: not a path of this machine's own."""
    if recipe.binary.startswith("$"):
        return recipe.binary
    return "python3" if program == sys.executable else program


def record_once(recipe: Recipe, binary: str) -> tuple[Captured, str]:
    """Run `recipe`'s client once against a fresh listener: (its first hello, the command
    as run, with the port written PORT and the temporary folder TMP)."""
    listener = Listener()
    with tempfile.TemporaryDirectory(prefix=f"record-{recipe.key}-") as tmpname:
        tmp = Path(tmpname)
        run = Run(port=listener.port, url=f"https://{recipe.host}:{listener.port}/", tmp=tmp,
                  binary=binary)
        argv = recipe.command(run)
        how = shlex.join([_shown(recipe, argv[0]), *argv[1:]])
        how = how.replace(str(tmp), "TMP").replace(str(listener.port), "PORT")
        log = open(tmp / "client.log", "wb")  # noqa: SIM115 (closed in the finally below)
        try:
            proc = subprocess.Popen(argv, cwd=tmp, env=client_env(tmp), stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            listener.close()
            log.close()
            raise HelloError(f"cannot start {argv[0]}: {exc}") from None
        try:
            captured = listener.wait_hello(proc, time.monotonic() + recipe.timeout)
        except HelloError as exc:
            log.flush()
            tail = (tmp / "client.log").read_bytes()[-300:].decode("utf-8", "replace").strip()
            raise HelloError(f"{exc}" + (f" (client output: {tail!r})" if tail else "")) from None
        finally:
            _kill(proc)
            listener.close()
            log.close()
    return captured, how


# -- profiles ----------------------------------------------------------------------------

def pq_shares(hello: bytes) -> list[str]:
    """The names of the post-quantum (ML-KEM or hybrid) groups with a key share in `hello`."""
    msg = decode_handshake(hello).message
    names = []
    for share in getattr(msg, "key_shares", ()) or ():
        g = group(share.group)
        if g is not None and g.kind in ("mlkem", "hybrid"):
            names.append(g.name)
    return names


def make_profile(recipe: Recipe, first: Captured, second: Captured | None, how: str,
                 facts: Facts) -> ClientProfile:
    """The profile of `recipe`'s client from its first recording (`second`: a repeat, to
    tell whether JA3 is stable)."""
    stable = second is None or second.ja3 == first.ja3
    notes = [recipe.notes] if recipe.notes else []
    notes.append("recorded by tools/record_clients.py: the client's first ClientHello to "
                 f"https://{recipe.host}:PORT/ in a network namespace with loopback only")
    if not stable:
        notes.append("JA3 differs between recordings (the client permutes its extensions)")
    source = ProfileSource(SourceKind.recorded, how, datetime.date.today().isoformat())
    return ClientProfile(
        id=facts.id, client=recipe.client, version=facts.version,
        platform=platform_name(), library=facts.library, source=source,
        hello=first.hello, record_version=first.record_version, ja3=first.ja3, ja4=first.ja4,
        ja3_stable=stable, trust_store=recipe.trust, notes="; ".join(notes))


def same_hello(a: ClientProfile, b: ClientProfile) -> bool:
    """Two profiles carry the same hello shape: JA4 and (both stable) JA3 equal."""
    return a.ja4 == b.ja4 and a.ja3_stable and b.ja3_stable and a.ja3 == b.ja3


def write_profile(p: ClientProfile, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(profile_to_json(p), indent=2) + "\n"
    (out / f"{p.id}.json").write_text(text, "utf-8")


# -- one client ----------------------------------------------------------------------------

def record_client(recipe: Recipe, facts: Facts, twice: bool) -> ClientProfile:
    """Record `recipe`'s client (twice when `twice`, for JA3 stability); HelloError when it
    fails or its two recordings do not have the same JA4."""
    first, how = record_once(recipe, facts.binary)
    second = record_once(recipe, facts.binary)[0] if twice else None
    if second is not None and second.ja4 != first.ja4:
        raise HelloError(f"two recordings differ in JA4 ({first.ja4}, {second.ja4}): the "
                         "client's hello is not repeatable; nothing recorded")
    profile = make_profile(recipe, first, second, how, facts)
    problems = check_profile(profile)
    if problems:
        raise HelloError("; ".join(problems))
    return profile


def compare(recipe: Recipe, p: ClientProfile,
            stored: dict[str, ClientProfile]) -> tuple[str, str | None]:
    """--check: (the stored profile compared with, what differs or None). A client whose
    hello another profile carries (named in its notes) is compared with that profile."""
    s = stored.get(p.id)
    if s is None:
        s = next((q for q in stored.values() if f"recipe {recipe.key} " in q.notes), None)
        if s is None:
            ids = ", ".join(sorted(i for i in stored if i.split("-")[0] == p.id.split("-")[0]))
            return p.id, f"no stored profile {p.id}" + (f" (stored: {ids})" if ids else "")
    if s.ja4 != p.ja4:
        return s.id, f"JA4 {p.ja4} but the stored profile {s.id} has {s.ja4}"
    if s.ja3_stable and s.ja3 != p.ja3:
        return s.id, f"JA3 {p.ja3} but the stored profile {s.id} has {s.ja3}"
    return s.id, None


def keep(recipe: Recipe, p: ClientProfile, profiles: dict[str, ClientProfile], out: Path,
         force: bool) -> str:
    """Write `p` unless another profile already carries its hello (then note the client in
    that one) or the stored one is the same client sending the same hello (kept, unless
    `force`). What was done, as a line."""
    twin = next((q for q in profiles.values() if q.id != p.id and same_hello(p, q)), None)
    if twin is not None:
        mention = f"recipe {recipe.key} ({p.client} {p.version}, {p.library})"
        if f"recipe {recipe.key} " not in twin.notes:
            twin = replace(twin, notes=f"{twin.notes}; {TWIN_NOTE} {mention}")
            profiles[twin.id] = twin
            write_profile(twin, out)
        return f"same hello as {twin.id} (same JA3 and JA4): not a new profile, noted there"
    old = profiles.get(p.id)
    if old is not None and p.key_minimums is None:
        # the key sizes the client enforces (docs/CLIENTS.md "Key size rules") are its
        # library build's, which the hello does not show: the same id, the same build
        p = replace(p, key_minimums=old.key_minimums)
    if old is not None and same_hello(old, p):
        twins = [n for n in old.notes.split("; ") if n.startswith(TWIN_NOTE)]
        p = replace(p, notes="; ".join([p.notes, *twins]))
    if (not force and old is not None and old.ja4 == p.ja4 and old.ja3_stable == p.ja3_stable
            and (old.ja3 == p.ja3 or not p.ja3_stable) and old.notes.startswith(p.notes)
            and (old.version, old.library, old.source.how) == (p.version, p.library, p.source.how)):
        return f"unchanged, kept {old.id}.json (JA4 {old.ja4})"
    profiles[p.id] = p
    write_profile(p, out)
    pq = pq_shares(p.hello)
    return (f"wrote {p.id}.json: JA4 {p.ja4}, ja3_stable {str(p.ja3_stable).lower()}"
            + (f", post-quantum share {'+'.join(pq)}" if pq else ""))


def table(profiles: tuple[ClientProfile, ...]) -> str:
    """The recorded profiles as docs/CLIENTS.md shows them."""
    rows = ["| id | client | version | TLS library | post-quantum share | JA4 |",
            "| --- | --- | --- | --- | --- | --- |"]
    for p in profiles:
        if p.source.kind is SourceKind.recorded:
            pq = "+".join(pq_shares(p.hello)) or "no"
            rows.append(f"| `{p.id}` | {p.client} | {p.version} | {p.library} | {pq} | "
                        f"`{p.ja4}` |")
    return "\n".join(rows)


# -- the network namespace -----------------------------------------------------------------

def enter_netns(argv: list[str]) -> None:
    """Re-run this script in a network namespace of its own with only loopback up, so that
    no client can reach any other address. Exits 2 when no namespace can be made."""
    flags = ["--net", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    unshare = shutil.which("unshare")
    probe = None
    if unshare:
        probe = subprocess.run([unshare, *flags, "true"], check=False, capture_output=True,
                               text=True)
    if unshare is None or probe is None or probe.returncode != 0:
        why = probe.stderr.strip() if probe is not None else "unshare (util-linux) not found"
        print(f"record_clients: cannot make a network namespace for the clients ({why}); "
              "without one a client could reach the network, so nothing is recorded "
              "(run as root, or where user namespaces are allowed)", file=sys.stderr)
        sys.exit(2)
    env = dict(os.environ, **{NETNS_ENV: "1"})
    os.execve(unshare, [unshare, *flags, "--", sys.executable, str(Path(__file__).resolve()),
                        *argv], env)


def namespace_setup(tmp: Path) -> None:
    """In the namespaces: loopback up, and DOTTED_HOST added to /etc/hosts (a bind mount
    seen only inside the mount namespace). Exits 2 when either fails."""
    hosts = tmp / "hosts"
    hosts.write_text(Path("/etc/hosts").read_text() + f"\n127.0.0.1 {DOTTED_HOST}\n")
    for argv in (["ip", "link", "set", "lo", "up"], ["mount", "--bind", str(hosts), "/etc/hosts"]):
        out = subprocess.run(argv, check=False, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"record_clients: {' '.join(argv)} failed in the namespace: "
                  f"{out.stderr.strip()}", file=sys.stderr)
            sys.exit(2)


# -- command line --------------------------------------------------------------------------

def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", metavar="ID", default=[],
                    help="recipes to run (see --list)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="profile folder")
    ap.add_argument("--check", action="store_true",
                    help="record once and compare JA4 (JA3 where stable) with the stored profile")
    ap.add_argument("--force", action="store_true",
                    help="rewrite a profile even when the client and its hello did not change")
    ap.add_argument("--list", action="store_true", help="list the recipes and exit")
    ap.add_argument("--table", action="store_true",
                    help="print the Markdown table of the recorded profiles (docs/CLIENTS.md)")
    args = ap.parse_args(argv)
    known = {r.key for r in RECIPES}
    unknown = [k for k in args.only if k not in known]
    if unknown:
        ap.error(f"unknown recipe {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return args


def run_one(recipe: Recipe, args: argparse.Namespace, profiles: dict[str, ClientProfile],
            tag: str) -> bool:
    """Record (or check) one client, printing one line; False when it failed."""
    facts = describe(recipe, tag)
    if isinstance(facts, str):
        print(f"{recipe.key}: {facts}")
        return not args.only
    try:
        p = record_client(recipe, facts, twice=not args.check)
    except (HelloError, OSError) as exc:
        print(f"{recipe.key}: FAILED: {exc}")
        return False
    if args.check:
        sid, problem = compare(recipe, p, profiles)
        print(f"{recipe.key}: {'DIFFERS: ' + problem if problem else 'same as stored'}"
              f" ({sid}, JA4 {p.ja4}, JA3 {p.ja3})")
        return problem is None
    print(f"{recipe.key}: {keep(recipe, p, profiles, args.out, args.force)}")
    return True


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.list:
        for r in RECIPES:
            print(f"{r.key:12} {r.client} ({r.package})")
        return 0
    if args.table:
        print(table(load_profiles(args.out) if args.out.is_dir() else ()))
        return 0
    if os.environ.get(NETNS_ENV) != "1":
        enter_netns(argv)
    with tempfile.TemporaryDirectory(prefix="record-clients-") as tmp:
        namespace_setup(Path(tmp))
        return record_all(args)


def record_all(args: argparse.Namespace) -> int:
    """Run the selected recipes; 0 when every one that had to succeed did."""
    profiles = {p.id: p for p in load_profiles(args.out)} if args.out.is_dir() else {}
    tag = platform_tag()
    ok = True
    for recipe in RECIPES:
        if not args.only or recipe.key in args.only:
            ok = run_one(recipe, args, profiles, tag) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
