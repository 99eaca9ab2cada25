"""Policies: Mozilla's guidelines built in, or a user policy file; loading and checking them.

Built-in policies (tlsprobe/data/policies/*.json): mozilla-modern-5.7, mozilla-intermediate-5.7,
mozilla-old-5.7 and the 6.0 guidelines that list X25519MLKEM768 (mozilla-modern-6.0,
mozilla-intermediate-6.0); the short names modern, intermediate (6.0) and old (5.7).
A user policy is a JSON or TOML file with the same keys; `extends = "intermediate"` starts
from a built-in one. The file format is documented in docs/POLICY.md. A policy that cannot
be loaded (unknown name, unreadable or malformed file) raises `PolicyError` with a one-line
message; the command that loads it turns that into its usage error (exit 2). Findings of
an audit against a policy: policy/findings.py.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tlsprobe import registry
from tlsprobe.data import read_text
from tlsprobe.errors import did_you_mean
from tlsprobe.escaping import quoted_value
from tlsprobe.model.audit import SEVERITIES
from tlsprobe.model.severity import Severity
from tlsprobe.policy.codes import DEFAULT_SEVERITY, lookup, unknown_code

if TYPE_CHECKING:
    from pathlib import Path

ALIASES = {"modern": "mozilla-modern-6.0", "intermediate": "mozilla-intermediate-6.0",
           "old": "mozilla-old-5.7", "mozilla-modern": "mozilla-modern-6.0",
           "mozilla-intermediate": "mozilla-intermediate-6.0", "mozilla-old": "mozilla-old-5.7"}
DEFAULT_POLICY = "intermediate"
VERSION_NAMES = {"sslv3": 0x0300, "ssl 3.0": 0x0300, "tlsv1": 0x0301, "tls 1.0": 0x0301,
                 "tlsv1.0": 0x0301, "tlsv1.1": 0x0302, "tls 1.1": 0x0302, "tlsv1.2": 0x0303,
                 "tls 1.2": 0x0303, "tlsv1.3": 0x0304, "tls 1.3": 0x0304}


#: the certificate key types `certificate_types` may name (policy/findings.py compares the
#: leaf's key type, model/describe.py's, lowercased; "EC ..." is "ecdsa")
CERTIFICATE_TYPES = ("rsa", "ecdsa", "ed25519", "ed448", "dsa")


class PolicyError(ValueError):
    """A policy that cannot be loaded: the message is one line naming the policy or file."""


KEYS = {"name", "title", "source", "extends", "versions", "required_versions", "cipher_suites",
        "tls13_cipher_suites", "groups", "required_groups", "dh_min_bits", "rsa_min_bits",
        "certificate_types", "certificate_curves", "server_preferred_order", "severity",
        "waive"}


@dataclass(frozen=True)
class Policy:
    """A loaded policy: what is allowed (None: not checked) and the finding severities."""

    name: str
    title: str = ""
    source: str = ""
    #: the built-in policy a file `extends` (its full name; "" for none): the file's keys
    #: replace the base's, but never its name, title or source (the file's own, or its
    #: file name and path)
    extends: str = ""
    versions: frozenset[int] | None = None
    required_versions: tuple[int, ...] = ()
    cipher_suites: frozenset[int] | None = None
    tls13_cipher_suites: frozenset[int] | None = None
    groups: frozenset[int] | None = None
    required_groups: tuple[int, ...] = ()
    dh_min_bits: int | None = None
    rsa_min_bits: int | None = None
    certificate_types: tuple[str, ...] | None = None
    #: the curves an ECDSA certificate key may be on (group code points; None: not checked)
    certificate_curves: frozenset[int] | None = None
    server_preferred_order: bool | None = None
    severity: dict[str, Severity] = field(default_factory=dict)
    #: finding code (or `AREA.*`) -> why it is accepted: such findings are listed as waived
    waive: dict[str, str] = field(default_factory=dict)

    def label(self) -> str:
        """The name, and the built-in policy it extends: "ours (extends
        mozilla-modern-6.0)"."""
        return f"{self.name} (extends {self.extends})" if self.extends else self.name

    def sev(self, code: str) -> Severity:
        """The severity of this policy's finding `code` (its `severity` table first)."""
        return lookup(self.severity, code) or DEFAULT_SEVERITY.get(code, Severity.low)

    def rated(self, code: str, exact: bool = False) -> Severity | None:
        """The severity this policy's `severity` table gives `code` (None: not named);
        `exact`: only an entry of the code itself counts, not its `AREA.*`."""
        return self.severity.get(code) if exact else lookup(self.severity, code)

    def waiver(self, code: str) -> str | None:
        """The reason this policy waives `code` for (None: not waived)."""
        return lookup(self.waive, code)


def builtin_names() -> list[str]:
    """The built-in policies' names (tlsprobe/data/policies)."""
    from importlib import resources  # a listing: not on the path of every scan
    folder = resources.files("tlsprobe.data").joinpath("policies")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


#: a policy as parsed from JSON or TOML, before it is checked
PolicyData = dict[str, object]


def _builtin_text(name: str) -> str | None:
    """The JSON text of the built-in policy `name` (None: there is none), read without
    listing the folder (`builtin_names`, for messages and --list-policies)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        return None
    try:
        return read_text("policies", f"{name}.json")
    except OSError:
        return None


def _raw_builtin(name: str, where: str = "") -> PolicyData:
    """The built-in policy `name` (or alias) as parsed JSON; `where`: the file whose
    `extends` names it (only a built-in policy can be extended)."""
    name = ALIASES.get(name.lower(), name.lower())
    text = _builtin_text(name)
    if text is None:
        known = f"built in: {', '.join(builtin_names())}, {', '.join(sorted(ALIASES))}"
        if where:
            raise PolicyError(f"policy file {where}: 'extends' names no built-in policy: "
                              f"{quoted_value(name)} ({known}; a file cannot be extended)")
        raise PolicyError(f"unknown policy {quoted_value(name)} ({known}; or a .json/.toml file)")
    data: PolicyData = json.loads(text)
    return data


#: the largest policy file read (one is a few kilobytes); read, not stat'ed, so that
#: neither a device nor a pipe is read whole into memory
MAX_POLICY_BYTES = 1 << 20


def _read_file(path: Path) -> PolicyData:
    from tlsprobe.files import UnreadableFile, read_bounded_text
    try:
        text = read_bounded_text(path, MAX_POLICY_BYTES, "a policy (docs/POLICY.md)",
                                 f"policy file {path}")
    except UnreadableFile as exc:
        raise PolicyError(str(exc)) from None
    try:
        if path.suffix.lower() == ".toml":
            import tomllib
            data: object = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError
        raise PolicyError(f"policy file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise PolicyError(f"policy file {path}: expected a table/object at the top level")
    table: PolicyData = {str(k): v for k, v in data.items()}
    table.setdefault("name", path.stem)
    return table


def load_policy(spec: str) -> Policy:
    """A built-in policy by name, or a JSON/TOML policy file (which may `extends` one)."""
    # a path, even a missing one (say it is missing); pathlib only then: scan's start-up
    if os.path.splitext(spec)[1].lower() in (".json", ".toml") or \
            os.path.exists(spec or ".") or "/" in spec or spec.startswith("."):
        from pathlib import Path
        path = Path(spec)
        data = _read_file(path)
        base = data.get("extends")
        if base is not None:
            if not isinstance(base, str):
                raise PolicyError(f"policy file {path}: 'extends' must be a policy name")
            inherited = {k: v for k, v in _raw_builtin(base, str(path)).items()
                         if k not in ("name", "title", "source")}
            data = {**inherited, **data, "extends": ALIASES.get(base.lower(), base.lower())}
        # what the policy is called is the file's: its own title, else its file name
        data = {"title": path.name, "source": str(path), **data}
        return parse_policy(data, str(path))
    return parse_policy(_raw_builtin(spec), spec)


def _list(data: PolicyData, key: str, where: str) -> list[object] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise PolicyError(f"policy {where}: '{key}' must be a list")
    return list(value)


def _codes(data: PolicyData, key: str, where: str,
           parse: Callable[[str], int] | None) -> list[int] | None:
    items = _list(data, key, where)
    if items is None:
        return None
    out = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise PolicyError(f"policy {where}: '{key}': {quoted_value(item)} is neither a name nor a "
                              "code point")
        if isinstance(item, int):
            out.append(_code_point(item, key, where, parse is None))
            continue
        text = item.strip()
        if parse is None:
            if text.lower() not in VERSION_NAMES:
                raise PolicyError(f"policy {where}: unknown version {quoted_value(text)} in '{key}' "
                                 "(use e.g. 'TLS 1.2' or 'TLSv1.2')")
            out.append(VERSION_NAMES[text.lower()])
            continue
        try:
            out.append(parse(text))
        except ValueError as exc:
            raise PolicyError(f"policy {where}: '{key}': {exc}") from None
    return out


def _code_point(item: int, key: str, where: str, version: bool) -> int:
    """A code point given as an integer: a version's must be one `versions` names (0x0300 to
    0x0304), any other a 16-bit value."""
    if version and item not in VERSION_NAMES.values():
        raise PolicyError(f"policy {where}: unknown version {item} in '{key}' (use e.g. "
                          "'TLS 1.2' or 'TLSv1.2')")
    if not 0 <= item <= 0xFFFF:
        raise PolicyError(f"policy {where}: '{key}': {item} is no code point (0 to 65535)")
    return item


def _bits(data: PolicyData, key: str, where: str) -> int | None:
    value = data.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value <= 0):
        raise PolicyError(f"policy {where}: '{key}' must be a number of bits (a positive "
                          "integer)")
    return value


def _typed(data: PolicyData, key: str, kind: type, where: str, what: str) -> None:
    """An error unless `key` is absent, null or of type `kind`."""
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise PolicyError(f"policy {where}: '{key}' must be {what}, not {quoted_value(value)}")


def parse_policy(data: PolicyData, where: str) -> Policy:
    """A policy from its parsed JSON/TOML table; `where` names it in error messages."""
    unknown = sorted(set(data) - KEYS)
    if unknown:
        hint = did_you_mean(unknown[0], KEYS) or f" (known: {', '.join(sorted(KEYS))})"
        raise PolicyError(f"policy {where}: unknown key {quoted_value(unknown[0])}{hint}")
    severity = _code_table(data, "severity", where)
    bad = next((k for k, v in severity.items() if v not in SEVERITIES), None)
    if bad is not None:
        raise PolicyError(f"policy {where}: [severity] {quoted_value(bad)}: {quoted_value(severity[bad])} is no "
                         f"severity (one of {', '.join(SEVERITIES)})")
    waive = _code_table(data, "waive", where)
    bad = next((k for k, v in waive.items() if not isinstance(v, str) or not v.strip()), None)
    if bad is not None:
        raise PolicyError(f"policy {where}: [waive] {quoted_value(bad)}: give the reason the finding is "
                         "accepted, as a non-empty string")
    versions = _codes(data, "versions", where, None)
    suites = _codes(data, "cipher_suites", where, registry.parse_suite)
    suites13 = _codes(data, "tls13_cipher_suites", where, registry.parse_suite)
    groups = _codes(data, "groups", where, registry.parse_group)
    curves = _codes(data, "certificate_curves", where, registry.parse_group)
    cert_types = _list(data, "certificate_types", where)
    odd = next((t for t in cert_types or () if str(t).lower() not in CERTIFICATE_TYPES), None)
    if odd is not None:
        raise PolicyError(f"policy {where}: unknown certificate type {quoted_value(odd)} in "
                         f"'certificate_types'" + (did_you_mean(str(odd), CERTIFICATE_TYPES) or
                                                   f" (one of {', '.join(CERTIFICATE_TYPES)})"))
    dh_min_bits, rsa_min_bits = _bits(data, "dh_min_bits", where), \
        _bits(data, "rsa_min_bits", where)
    for key in ("name", "title", "source", "extends"):
        _typed(data, key, str, where, "a string")
    _typed(data, "server_preferred_order", bool, where, "true or false")
    order = data.get("server_preferred_order")
    return Policy(
        name=str(data.get("name") or where), title=str(data.get("title", "")),
        source=str(data.get("source", "")), extends=str(data.get("extends") or ""),
        versions=frozenset(versions) if versions is not None else None,
        required_versions=tuple(_codes(data, "required_versions", where, None) or ()),
        cipher_suites=frozenset(suites) if suites is not None else None,
        tls13_cipher_suites=frozenset(suites13) if suites13 is not None else None,
        groups=frozenset(groups) if groups is not None else None,
        required_groups=tuple(_codes(data, "required_groups", where, registry.parse_group) or ()),
        dh_min_bits=dh_min_bits, rsa_min_bits=rsa_min_bits,
        certificate_types=tuple(str(t).lower() for t in cert_types) if cert_types is not None
        else None, certificate_curves=frozenset(curves) if curves is not None else None,
        server_preferred_order=bool(order) if order is not None else None,
        severity={k: Severity(str(v)) for k, v in severity.items()},   # checked: SEVERITIES
        waive={k: " ".join(str(v).split()) for k, v in waive.items()})   # checked: str


def _code_table(data: PolicyData, key: str, where: str) -> dict[str, object]:
    """The table `key` (finding code -> value), every code checked against the registry of
    finding codes (policy/codes.py): a typo is an error naming the closest codes."""
    table = data.get(key)
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise PolicyError(f"policy {where}: '{key}' must be a table of finding codes")
    flat = _flat(table)
    for code in flat:
        why = unknown_code(code)
        if why is not None:
            raise PolicyError(f"policy {where}: [{key}] {why}")
    return flat


def _flat(table: dict[object, object], prefix: str = "") -> dict[str, object]:
    """A code table with TOML's dotted keys joined again: `check.sct = "info"` unquoted is
    the table {"check": {"sct": "info"}}, the code check.sct."""
    out: dict[str, object] = {}
    for k, v in table.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, f"{name}."))
        else:
            out[name] = v
    return out
