"""The notes of a capture analysis's summary that need some wording: connections the
capture layer evicted, connections whose logged keys could not be used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlsprobe.capture import CaptureStats

if TYPE_CHECKING:   # engine/ (its package loads cryptography): only with a key log
    from tlsprobe.engine.keylog import KeyLog


def eviction_note(stats: CaptureStats) -> tuple[str, ...]:
    """The connections the capture layer evicted to keep memory flat, and why (an idle
    or payload-less connection loses nothing that is reported; one evicted with its
    handshake possibly in progress is said apart)."""
    if not stats.tcp_evicted:
        return ()
    from tlsprobe.capture.eviction import IDLE_TIMEOUT, IDLE_TIMEOUT_DATA
    parts = []
    if stats.tcp_evicted_idle:
        parts.append(f"{stats.tcp_evicted_idle} idle (no packet for {IDLE_TIMEOUT:g} s of "
                     f"capture time, {IDLE_TIMEOUT_DATA:g} s once payload flowed)")
    quiet = stats.tcp_evicted_limit - stats.tcp_evicted_in_progress
    if quiet:
        parts.append(f"{quiet} over the connection limit with no payload or nothing more "
                     "to read")
    if stats.tcp_evicted_in_progress:
        parts.append(f"{stats.tcp_evicted_in_progress} over twice the connection limit "
                     "with a handshake possibly in progress")
    return ((f"{stats.tcp_evicted} TCP connection(s) evicted before their end to bound "
             f"memory: {'; '.join(parts)}"),)


def undecrypted_note(undecrypted: dict[tuple[str, str], int]) -> str:
    """One line for the connections whose logged keys could not be used: suites grouped by
    reason ("suites A, B (RC2: not in cryptography)"), then the other reasons."""
    by_reason: dict[str, list[str]] = {}
    for (suite, reason) in sorted(undecrypted):
        by_reason.setdefault(reason, [])
        if suite:
            by_reason[reason].append(suite)
    parts = []
    for reason, suites in sorted(by_reason.items(), key=lambda kv: (not kv[1], kv[0])):
        if suites:
            word = "suite" if len(suites) == 1 else "suites"
            parts.append(f"{word} {', '.join(suites)} ({reason})")
        else:
            parts.append(reason)
    total = sum(undecrypted.values())
    return f"{total} connection(s) not decrypted: {'; '.join(parts)}"


def keys_note(name: str, tls_connections: int, keys_matched: int,
              undecrypted: dict[tuple[str, str], int], udp_keyed: int = 0,
              udp_undecrypted: dict[str, int] | None = None) -> list[str]:
    """What a usable key log gave: no key for any connection, or the connections whose
    keys it has but that were not decrypted (`udp_keyed`: QUIC and DTLS handshakes it had
    secrets for; `udp_undecrypted`: why some of them were not decrypted), else nothing."""
    if tls_connections and not keys_matched and not udp_keyed:
        return [f"{name}: no key matched any connection"]
    if udp_undecrypted:
        undecrypted = {**undecrypted, **{("", why): n for why, n in udp_undecrypted.items()}}
    return [f"{name}: {undecrypted_note(undecrypted)}"] if undecrypted else []


def keylog_limits_note(name: str, keylog: KeyLog) -> list[str]:
    """Keys a finished key log holds past its limits (its first 64 MiB, 100,000 sessions),
    which were not read: the connections they are for are not decrypted, and that is not
    for want of keys (docs/LIMITS.md)."""
    from tlsprobe.engine.keylog import DEFAULT_MAX_BYTES, DEFAULT_MAX_SESSIONS
    parts = []
    if keylog.cut:
        parts.append(f"only its first {DEFAULT_MAX_BYTES >> 20} MiB were read")
    sessions = keylog.dropped - keylog.cut
    if sessions:
        parts.append(f"{sessions} line(s) past {DEFAULT_MAX_SESSIONS} sessions were not "
                     "taken")
    if not parts:
        return []
    text = f"{name}: {'; '.join(parts)} (the key log's limits): connections keyed there "
    return [text + "are not decrypted"]
