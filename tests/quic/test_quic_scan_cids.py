"""Each QUIC connection of a scan picks its own random connection IDs: the Source
Connection ID of its packets (and the Destination CID of its first Initial) differ from
every other connection's, so a scan's connections cannot be linked by them, nor a relay or
a middlebox that routes by CID take one connection's packets for another's. Was: one
Source Connection ID for every connection of the scan (the connector's). Seen through a
UDP relay on loopback (test_quic_loss.Relay) in front of aioquic's server."""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from tests.quic.test_quic_loss import Relay, relay  # noqa: F401


def _long_cids(datagram: bytes) -> tuple[bytes, bytes] | None:
    """(Destination CID, Source CID) of a datagram's first packet when it is a long
    header one (a client's Initial or Handshake), else None."""
    if not datagram or not datagram[0] & 0x80 or len(datagram) < 7:
        return None
    at = 6 + datagram[5]
    return datagram[6:at], datagram[at + 1:at + 1 + datagram[at]]


def test_each_connection_of_a_quic_scan_has_its_own_connection_ids(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519,secp256r1")
    r = relay(server)
    seen: dict[tuple[str, int], set[bytes]] = defaultdict(set)   # client port -> its SCIDs
    first_dcids: dict[tuple[str, int], bytes] = {}

    def note(datagram: bytes) -> bytes:
        cids = _long_cids(datagram)
        if cids is not None and r._client is not None:
            seen[r._client].add(cids[1])
            first_dcids.setdefault(r._client, cids[0])
        return datagram
    r.alter_client = note
    res = run_cli("scan", f"127.0.0.1:{r.port}", "--quic", "--checks", "groups", "--json",
                  "--no-progress", "--no-policy", "--timeout", "3", "--per-host", "1",
                  timeout=120)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["total_connections"] >= 3, report["total_connections"]
    assert len(seen) >= 3, seen
    assert all(len(cids) == 1 for cids in seen.values()), seen   # one per connection
    scids = [next(iter(cids)) for cids in seen.values()]
    assert len(set(scids)) == len(scids), scids
    assert all(len(cid) >= 8 for cid in scids), scids
    assert len(set(first_dcids.values())) == len(first_dcids), first_dcids
