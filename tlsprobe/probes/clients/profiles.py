"""The client profiles shipped in tlsprobe/data/clients/: one JSON file per profile.

Format (docs/CLIENTS.md): {"id", "client", "version", "platform", "library", "source":
{"kind", "how", "when", "file", "frame", "sha256", "identified_by"}, "hello" (hex of the
ClientHello handshake message, header included), "record_version" (int), "ja3", "ja4",
"ja3_stable", "trust_store", "notes", "key_minimums" (null, or {"dh_bits", "rsa_bits",
"ecc_bits", "basis"}: the client's key size rules; absent is null)}. `check_profile` recomputes JA3 and JA4 from the bytes,
so a stored fingerprint cannot drift from the hello it names.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import cast

from tlsprobe.files import UnreadableFile, read_bounded_text
from tlsprobe.model.clients import (
    ClientProfile,
    KeyMinimums,
    ProfileSource,
    SourceKind,
    TrustStore,
)
from tlsprobe.wire import decode_handshake
from tlsprobe.wire.fingerprints import ja3, ja4
from tlsprobe.wire.hello import ClientHello
from tlsprobe.wire.hello_info import client_hello_info

__all__ = [
    "check_profile",
    "fingerprints",
    "load_profiles",
    "profile_from_json",
    "profile_to_json",
]


def fingerprints(hello: bytes) -> tuple[str, str]:
    """(JA3, JA4) of a ClientHello handshake message; ValueError when it is not one."""
    msg = decode_handshake(hello).message
    if type(msg) is not ClientHello:
        raise ValueError(f"not a ClientHello (handshake type {hello[:1].hex()})")
    info = client_hello_info(msg, len(hello))
    return ja3(info)[0], ja4(info)[0]


def profile_from_json(data: dict[str, object]) -> ClientProfile:
    src = cast(dict[str, object], data["source"])
    frame = src.get("frame")
    source = ProfileSource(SourceKind(str(src["kind"])), str(src["how"]), str(src["when"]),
                           _opt(src.get("file")), int(str(frame)) if frame is not None else None,
                           _opt(src.get("sha256")), _opt(src.get("identified_by")))
    return ClientProfile(
        id=str(data["id"]), client=str(data["client"]), version=str(data["version"]),
        platform=str(data["platform"]), library=_opt(data.get("library")), source=source,
        hello=bytes.fromhex(str(data["hello"])), record_version=int(str(data["record_version"])),
        ja3=str(data["ja3"]), ja4=str(data["ja4"]), ja3_stable=bool(data["ja3_stable"]),
        trust_store=TrustStore(str(data["trust_store"])), notes=str(data.get("notes", "")),
        key_minimums=_minimums(data.get("key_minimums")))


def _minimums(data: object) -> KeyMinimums | None:
    """The key size rules of a profile file (TypeError, ValueError: a malformed one)."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise TypeError(f"key_minimums: an object or null, not {data!r}")
    bits: dict[str, int | None] = {}
    for name in ("dh_bits", "rsa_bits", "ecc_bits"):
        value = data.get(name)
        if value is not None and (type(value) is not int or value <= 0):
            raise ValueError(f"key_minimums.{name}: a positive integer or null, not {value!r}")
        bits[name] = value
    return KeyMinimums(bits["dh_bits"], bits["rsa_bits"], bits["ecc_bits"],
                       str(data.get("basis", "")))


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def profile_to_json(p: ClientProfile) -> dict[str, object]:
    s = p.source
    return {"id": p.id, "client": p.client, "version": p.version, "platform": p.platform,
            "library": p.library,
            "source": {"kind": s.kind.value, "how": s.how, "when": s.when, "file": s.file,
                       "frame": s.frame, "sha256": s.sha256, "identified_by": s.identified_by},
            "hello": p.hello.hex(), "record_version": p.record_version, "ja3": p.ja3,
            "ja4": p.ja4, "ja3_stable": p.ja3_stable, "trust_store": p.trust_store.value,
            "notes": p.notes, "key_minimums": None if p.key_minimums is None else {
                "dh_bits": p.key_minimums.dh_bits, "rsa_bits": p.key_minimums.rsa_bits,
                "ecc_bits": p.key_minimums.ecc_bits, "basis": p.key_minimums.basis}}


def check_profile(p: ClientProfile) -> list[str]:
    """What is wrong with a profile (empty: nothing): its hello decodes, its stored JA3 and
    JA4 are those of its bytes, its id is a file-name stem."""
    problems = []
    try:
        got3, got4 = fingerprints(p.hello)
    except ValueError as exc:
        return [f"{p.id}: the hello does not decode: {exc}"]
    if got4 != p.ja4:
        problems.append(f"{p.id}: stored JA4 {p.ja4} but the hello's is {got4}")
    if got3 != p.ja3:
        problems.append(f"{p.id}: stored JA3 {p.ja3} but the hello's is {got3}")
    if not p.id or any(c not in "abcdefghijklmnopqrstuvwxyz0123456789-._" for c in p.id):
        problems.append(f"{p.id!r}: an id is lower-case letters, digits, '-', '.', '_'")
    return problems


#: the largest profile file read (a recorded hello is a few KiB; the packaged ones are 5)
MAX_PROFILE_BYTES = 1 << 20


def load_profiles(folder: Path | None = None) -> tuple[ClientProfile, ...]:
    """Every profile in `folder` (default: the packaged tlsprobe/data/clients), by id. A file
    that is no profile (not JSON, a field missing or of another type, over
    MAX_PROFILE_BYTES) or a second file of one id (which one would win?) is a ValueError
    naming the files and what is wrong."""
    if folder is None:
        root = resources.files("tlsprobe.data").joinpath("clients")
        files = [f for f in root.iterdir() if f.name.endswith(".json")]
    else:
        files = list(folder.glob("*.json"))
    by_id: dict[str, tuple[str, ClientProfile]] = {}
    for file in sorted(files, key=lambda f: f.name):
        profile = _read_profile(file)
        first = by_id.setdefault(profile.id, (file.name, profile))[0]
        if first != file.name:
            raise ValueError(f"{first} and {file.name} are both profile {profile.id!r}: "
                             "keep one (an id names one profile)")
    return tuple(sorted((p for _, p in by_id.values()), key=lambda p: p.id))


def _text_of(file: Traversable) -> str:
    """The file's text, at most MAX_PROFILE_BYTES of UTF-8 (else a ValueError)."""
    if not isinstance(file, Path):      # a packaged profile (in a folder or a zip archive)
        return file.read_text(encoding="utf-8")
    try:
        return read_bounded_text(file, MAX_PROFILE_BYTES,
                            "a client profile (docs/CLIENTS.md)", file.name)
    except UnreadableFile as exc:
        raise ValueError(str(exc)) from None


def _read_profile(file: Traversable) -> ClientProfile:
    text = _text_of(file)
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError(f"a JSON object, not {type(data).__name__}")
        if not isinstance(data.get("source", {}), dict):
            raise TypeError("'source' is not an object")
        return profile_from_json(data)
    except KeyError as exc:
        raise ValueError(f"{file.name}: not a client profile: no {exc.args[0]!r} field"
                         ) from None
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{file.name}: not a client profile ({exc})") from None
