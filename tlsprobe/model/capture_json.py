"""The JSON text of a TCP connection's report (`ConnectionReport.to_json`), written from its
field values: one function for the report's `to_json` and for the analysis that writes the
text without building the report (offline AnalyzerOptions.json_text), so the two cannot
differ.

A module of its own, apart from the report types of `model.capture`, so that the optional
compiled fast path can compile it (build_backend/compiled_modules.txt): `pcap --jsonl`
writes one such text per connection, some kilobytes each, and interpreted it was a seventh
of a short connection's cost. `model.capture` holds frozen dataclasses that are pickled to
the `--jobs` workers and built through their `__dict__`, which a compiled class refuses, so
it stays Python.
"""

from __future__ import annotations

from collections.abc import Callable

from tlsprobe.model.encode import plain_string
from tlsprobe.model.json_scalars import number

__all__ = ["connection_json", "number"]


def connection_json(dumps: Callable[[object], str], parts: tuple[str, ...], file: str,
                    cid: int, transport: str, protocol: str, client: str, server: str,
                    client_ip: str, client_port: int, server_ip: str, server_port: int,
                    first_frame: int, last_frame: int, client_hellos: int,
                    client_random: str | None, ticket_lifetime: int | None,
                    timings: str, client_bytes: int, server_bytes: int, encrypted: bool,
                    decrypted: bool, complete: bool | None, close: str | None,
                    midstream: bool, preamble: str | None, gap_bytes: int,
                    problems: tuple[str, ...], compression: object,
                    sslv2: tuple[object, ...], framing: str | None,
                    quic_version: object = None) -> str:
    """A `ConnectionReport`'s JSON object (`to_json`) from its field values, the shape's
    part already written (`parts`, see `model.capture.shape_json`) and the timings' object
    too (its numbers as `number` writes them). `compression` (a Codepoint or None) and
    `sslv2` (Ciphers) and `quic_version` (a Codepoint or None) are written by `dumps`, the run's encoder. The flags are JSON
    booleans or null, written inline (no call each: once per connection)."""
    text = plain_string  # for values never None
    return (f'{{"kind": "connection", "file": {text(file)}, "id": {cid}, '
            f'"transport": {text(transport)}, "protocol": {text(protocol)}, '
            f'"client": {text(client)}, "server": {text(server)}, '
            f'"client_ip": {text(client_ip)}, "client_port": {client_port}, '
            f'"server_ip": {text(server_ip)}, "server_port": {server_port}, '
            f'"first_frame": {first_frame}, "last_frame": {last_frame}, '
            f'{parts[0]}, "client_hellos": {client_hellos}, '
            f'"client_random": {"null" if client_random is None else text(client_random)}, '
            f'{parts[1]}, "session_ticket_lifetime": '
            f'{"null" if ticket_lifetime is None else str(ticket_lifetime)}, '
            f'{parts[2]}, "timings": {timings}, '
            f'"client_bytes": {client_bytes}, "server_bytes": {server_bytes}, '
            f'"encrypted": {"null" if encrypted is None else "true" if encrypted else "false"}, '
            f'"decrypted": {"null" if decrypted is None else "true" if decrypted else "false"}, '
            f'"handshake_complete": '
            f'{"null" if complete is None else "true" if complete else "false"}, '
            f'"close": {"null" if close is None else text(close)}, '
            f'"midstream": {"null" if midstream is None else "true" if midstream else "false"}, '
            f'"preamble": {"null" if preamble is None else text(preamble)}, '
            f'"gap_bytes": {gap_bytes}, '
            f'"problems": {dumps(problems) if problems else "[]"}, '
            f'"compression": {"null" if compression is None else dumps(compression)}, '
            f'"sslv2_cipher_specs": {dumps(sslv2) if sslv2 else "[]"}, '
            f'"framing": {"null" if framing is None else text(framing)}, '
            f'"quic_version": {"null" if quic_version is None else dumps(quic_version)}}}')
