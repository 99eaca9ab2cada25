"""Survey targets: from a file, stdin, or a CIDR/port list; sharded by address.

All ports of one address land in one shard, so the per-host connection cap of the scanner's
Scheduler (which lives inside one shard's audit) holds for the whole survey.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from tlsprobe.errors import UsageError
from tlsprobe.net.targets import BadLine, read_target_file
from tlsprobe.net.tcp import Target

#: the most targets (addresses times ports) a CIDR spec may expand to: a /12 of IPv4 on one
#: port. The targets, their shards and the manifest are held in memory (about 0.5 kB a
#: target, 0.5 GB at this limit; a /8 took 8 GB and minutes before its first connection)
MAX_CIDR_TARGETS = 1 << 20


@dataclass(frozen=True)
class Shard:
    """One unit of work: its number (from 0) and targets with their input index (from 1)."""

    number: int
    targets: tuple[tuple[int, Target], ...]

    @property
    def name(self) -> str:
        return f"shard-{self.number:05d}"


def _ports(text: str, spec: str) -> list[int]:
    ports = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or not 1 <= int(item) <= 65535:
            raise UsageError(f"bad port {item!r} in {spec!r}: expected 1-65535")
        ports.append(int(item))
    return list(dict.fromkeys(ports))


#: ADDRESS/PREFIX[:PORTS] or [V6]/PREFIX[:PORTS]; anything else is a file name
_CIDR = re.compile(r"^(\[[0-9A-Za-z:.%]*\]|[0-9A-Za-z:.]+)/[^/]*$")


def _looks_like_cidr(spec: str) -> bool:
    return bool(_CIDR.match(spec.strip())) and not os.path.exists(spec)


def expand_cidr(spec: str) -> list[Target]:
    """`127.0.0.0/30:443,8443` (or `[::1]/128:443`): every address of the network (hosts
    and network/broadcast alike, a survey decides nothing on its own) times every port."""
    network_text, port_text = spec, "443"
    if spec.startswith("["):
        close = spec.find("]")
        if close < 0:
            raise UsageError(f"bad CIDR {spec!r}: missing ']'")
        network_text, rest = spec[1:close], spec[close + 1:]
        if rest.startswith("/"):
            prefix, _, port_part = rest[1:].partition(":")
            network_text += "/" + prefix
            port_text = port_part or "443"
    elif spec.count(":") == 1:
        network_text, port_text = spec.split(":")
    try:
        network = ipaddress.ip_network(network_text.strip(), strict=False)
    except ValueError as exc:
        raise UsageError(f"bad CIDR {spec!r}: {exc}") from None
    ports = _ports(port_text, spec)
    count = network.num_addresses * len(ports)
    if count > MAX_CIDR_TARGETS:
        raise UsageError(f"CIDR {spec!r} makes {count:,} targets ({network.num_addresses:,} "
                         f"addresses x {len(ports)} port{'s' if len(ports) > 1 else ''}), "
                         f"more than one survey holds ({MAX_CIDR_TARGETS:,}, a /12 on one "
                         f"port): split it into several surveys")
    return [Target(str(address), port) for address in network for port in ports]


def read_spellings(spec: str) -> tuple[list[Target], list[BadLine]]:
    """The targets of `spec` in input order, each spelling once, and the lines that are no
    target. `spec`: '-' (stdin), a file of HOST[:PORT] lines ('#' comments; a bad line is
    reported as FILE:LINE and the others still run, as with `scan -f`), or a CIDR/port list
    (a bad one is a usage error). No target at all and no bad line is a usage error. A
    survey audits `once_by_key` of them; the spellings are what an older tlsprobe
    surveyed, whose folders are resumed on them (`older_plan`)."""
    if spec != "-" and _looks_like_cidr(spec):
        return expand_cidr(spec), []
    items = read_target_file(spec)
    if not items:
        raise UsageError(f"no target in {'<stdin>' if spec == '-' else spec}")
    return (list(dict.fromkeys(item for item in items if isinstance(item, Target))),
            [item for item in items if isinstance(item, BadLine)])


def once_by_key(targets: list[Target]) -> list[Target]:
    """Each host:port once, whatever its spelling ('LOCALHOST' and 'localhost', '[0:0::1]'
    and '[::1]': `Target.key`): the first one given."""
    first: dict[tuple[str, int], Target] = {}
    for target in targets:
        first.setdefault(target.key, target)
    return list(first.values())


def read_targets(spec: str) -> tuple[list[Target], list[BadLine]]:
    """The targets in input order, duplicates once (the same host in any spelling and
    port), and the lines that are no target (`read_spellings`)."""
    spelled, bad = read_spellings(spec)
    return once_by_key(spelled), bad


def digest(targets: list[Target]) -> str:
    """A fingerprint of the target list (a resumed run must survey the same targets)."""
    h = hashlib.sha256()
    for t in targets:
        h.update(f"{t.display}\n".encode())
    return h.hexdigest()


def shard_targets(targets: list[Target], size: int,
                  group: Callable[[Target], str] = lambda t: t.key[0]) -> list[Shard]:
    """Shards of about `size` targets; every port of one host (`group`: its address or
    name, whatever the spelling) in the same shard (a host with more ports than `size` gets
    a shard of its own). Deterministic for one input."""
    by_host: dict[str, list[tuple[int, Target]]] = {}
    for index, target in enumerate(targets, 1):
        by_host.setdefault(group(target), []).append((index, target))
    shards: list[Shard] = []
    current: list[tuple[int, Target]] = []
    for group_targets in by_host.values():
        if current and len(current) + len(group_targets) > size:
            shards.append(Shard(len(shards), tuple(current)))
            current = []
        current.extend(group_targets)
    if current:
        shards.append(Shard(len(shards), tuple(current)))
    return shards


def older_plan(spelled: list[Target], size: int, old_identity: object,
               identity: dict[str, object]) -> tuple[dict[str, object], list[Shard]] | None:
    """The identity and shards of a survey folder an older tlsprobe began on these very
    targets, when `old_identity` (its manifest's) is that: it surveyed each spelling of a
    host as a target of its own and sharded them by spelling. None otherwise. Resumed on
    its own shards (`remaining` leaves out what its done shards hold), it is neither
    refused as "a survey of different arguments" nor audits a host:port twice."""
    older = {**identity, "targets_sha256": digest(spelled), "targets": len(spelled)}
    if len(once_by_key(spelled)) == len(spelled) or old_identity != older:
        return None
    return older, shard_targets(spelled, size, lambda t: t.host.lower())


def remaining(shards: list[Shard], done: set[str]) -> tuple[list[Shard], list[Shard]]:
    """The shards not done, each host:port (`Target.key`) in none but the first shard that
    holds it: (those with targets left, those left with none). A done shard's host:port, or
    an earlier one's, is not audited again: a folder of an older tlsprobe held spellings of
    one host in shards of their own."""
    seen = {t.key for s in shards if s.name in done for _, t in s.targets}
    todo: list[Shard] = []
    emptied: list[Shard] = []
    for shard in shards:
        if shard.name in done:
            continue
        kept = tuple((i, t) for i, t in shard.targets if t.key not in seen)
        seen.update(t.key for _, t in kept)
        if kept:
            todo.append(Shard(shard.number, kept))
        else:
            emptied.append(shard)
    return todo, emptied
