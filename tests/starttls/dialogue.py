"""Play a server's side of a STARTTLS dialogue into `StartTls` and check the client's side.

A transcript is a list of (sender, bytes): "C" items must be exactly what the machine asked
to send at that point, "S" items are fed to it whole, byte by byte or line by line (`mode`).
"""
from __future__ import annotations

from tlsprobe.net.starttls import StartTls, Status, Step

MODES = ("whole", "bytes", "lines")

Transcript = list[tuple[str, bytes]]


def chunks(data: bytes, mode: str) -> list[bytes]:
    if mode == "whole":
        return [data]
    if mode == "bytes":
        return [data[i:i + 1] for i in range(len(data))]
    if mode == "lines":
        parts = data.split(b"\n")
        return [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    raise ValueError(mode)


def play(proto: str, transcript: Transcript, mode: str = "whole",
         **options: object) -> tuple[StartTls, Step]:
    """Run the transcript; stop at the first READY or FAILED step; return the machine and
    that last step. Every byte the client sent must appear in the transcript, in order."""
    machine = StartTls(proto, server_name="localhost", **options)  # type: ignore[arg-type]
    step = machine.start()
    pending = bytearray(step.send)
    for sender, data in transcript:
        if step.status is Status.FAILED:
            break
        if sender == "C":
            assert bytes(pending[:len(data)]) == data, (bytes(pending), data)
            del pending[:len(data)]
            continue
        if step.status is not Status.NEED_DATA:
            break
        for chunk in chunks(data, mode):
            step = machine.receive_data(chunk)
            pending += step.send
            if step.status is not Status.NEED_DATA:
                break
    assert not pending or step.status is Status.FAILED, bytes(pending)
    return machine, step
