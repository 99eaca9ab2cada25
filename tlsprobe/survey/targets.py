"""Survey targets: from a file, stdin, or a CIDR/port list; sharded by address.

All ports of one address land in one shard, so the per-host connection cap of the scanner's
Scheduler (which lives inside one shard's audit) holds for the whole survey.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
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


def read_targets(spec: str) -> tuple[list[Target], list[BadLine]]:
    """The targets in input order, duplicates once, and the lines that are no target.
    `spec`: '-' (stdin), a file of HOST[:PORT] lines ('#' comments; a bad line is reported
    as FILE:LINE and the others still run, as with `scan -f`), or a CIDR/port list (a bad
    one is a usage error). Duplicates: the same host (any spelling, `Target.key`) and port. No target at all and no bad line is a usage error."""
    if spec != "-" and _looks_like_cidr(spec):
        return expand_cidr(spec), []
    items = read_target_file(spec)
    bad = [item for item in items if isinstance(item, BadLine)]
    # each host:port once, whatever its spelling ('LOCALHOST' and 'localhost', '[0:0::1]'
    # and '[::1]'): the first one given
    first: dict[tuple[str, int], Target] = {}
    for item in items:
        if isinstance(item, Target):
            first.setdefault(item.key, item)
    targets = list(first.values())
    if not items:
        raise UsageError(f"no target in {'<stdin>' if spec == '-' else spec}")
    return targets, bad


def digest(targets: list[Target]) -> str:
    """A fingerprint of the target list (a resumed run must survey the same targets)."""
    h = hashlib.sha256()
    for t in targets:
        h.update(f"{t.display}\n".encode())
    return h.hexdigest()


def shard_targets(targets: list[Target], size: int) -> list[Shard]:
    """Shards of about `size` targets; every port of one host in the same shard (a host
    with more ports than `size` gets a shard of its own). Deterministic for one input."""
    by_host: dict[str, list[tuple[int, Target]]] = {}
    for index, target in enumerate(targets, 1):
        by_host.setdefault(target.key[0], []).append((index, target))
    shards: list[Shard] = []
    current: list[tuple[int, Target]] = []
    for group in by_host.values():
        if current and len(current) + len(group) > size:
            shards.append(Shard(len(shards), tuple(current)))
            current = []
        current.extend(group)
    if current:
        shards.append(Shard(len(shards), tuple(current)))
    return shards
