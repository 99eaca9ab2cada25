"""Which connections to report: by host, port, SNI, negotiated group and version.

Values of one option are alternatives (any may match); different options must all match.
Hosts match either endpoint's address or the SNI exactly (case-insensitive); ``ADDR:PORT``
(``[v6]:PORT`` for IPv6) matches one endpoint by address and port together. SNI patterns
are shell-style (``*.example.com``); groups take names, hex codepoints or decimal ids as
tshark prints them (``x25519``, ``0x11ec``, ``29``); versions take names or hex
(``1.3``, ``TLSv1.2``, ``0x0303``).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tlsprobe import registry
from tlsprobe.model.capture import ConnectionReport

_VERSION_WORDS = {"1.3": 0x0304, "1.2": 0x0303, "1.1": 0x0302, "1.0": 0x0301, "1": 0x0301,
                  "3.0": 0x0300, "3": 0x0300, "2.0": 0x0002, "2": 0x0002}


def parse_version(text: str) -> int:
    """"1.3", "TLS1.3", "tlsv1_2", "ssl3", "0x0303" -> the protocol version id."""
    t = text.strip().lower()
    if t.startswith("0x"):
        try:
            return int(t, 16)
        except ValueError:
            raise ValueError(f"unknown version {text!r}") from None
    for prefix in ("tlsv", "tls", "sslv", "ssl"):
        if t.startswith(prefix):
            rest = t[len(prefix):].replace("_", ".").lstrip(" .")
            if prefix.startswith("ssl"):
                return {"3": 0x0300, "3.0": 0x0300, "2": 0x0002, "2.0": 0x0002}.get(rest) or \
                    _unknown(text)
            t = rest
            break
    code = _VERSION_WORDS.get(t.replace("_", "."))
    return code if code is not None else _unknown(text)


def _unknown(text: str) -> int:
    raise ValueError(f"unknown version {text!r} (use 1.0..1.3, TLSv1.2, ssl3 or hex)")


def _normal_ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        return text.lower()


def parse_host(text: str) -> tuple[str, int | None]:
    """"10.0.0.1", "::1", "example.com" -> (host, None); "10.0.0.1:443", "[::1]:443",
    "example.com:443" -> (host, port). Raises ValueError with one line."""
    t = text.strip()
    bare = t[1:-1] if t.startswith("[") and t.endswith("]") else t  # "[::1]" but not "[::1"
    try:
        return str(ipaddress.ip_address(bare)), None
    except ValueError:
        pass
    unbalanced = ValueError(f"--host {text!r}: unbalanced brackets (IPv6 with a port is "
                            "written [ADDR]:PORT)")
    if t.startswith("["):
        addr, sep, port = t[1:].partition("]:")
        if not sep or "[" in addr or "]" in addr:
            raise unbalanced
    elif "[" in t or "]" in t:
        raise unbalanced
    elif t.count(":") == 1:
        addr, sep, port = t.partition(":")
    else:
        addr, sep, port = t, "", ""
    if sep:
        if not port.isdigit() or int(port) > 65535:
            raise ValueError(f"--host {text!r}: bad port {port!r} (ADDR:PORT, [IPv6]:PORT, or "
                             "--port PORT for either endpoint)")
        return _normal_ip(addr), int(port)
    if ":" in t or not t:
        raise ValueError(f"--host {text!r}: not an address or name (IPv6 with a port is "
                         "written [ADDR]:PORT)")
    return t.lower(), None


def parse_group_id(text: str) -> int:
    """A group name, hex codepoint or decimal id (tshark prints groups as "x25519 (29)")."""
    t = text.strip()
    if t.isdigit():
        if int(t) > 0xFFFF:
            raise ValueError(f"--group {text!r}: a group id is at most 65535 (0xffff)")
        return int(t)
    try:
        return registry.parse_group(t)
    except ValueError as exc:
        raise ValueError(f"--group: {exc}; decimal ids like 29 work too") from None


@dataclass(frozen=True)
class ConnectionFilter:
    hosts: tuple[tuple[str, int | None], ...] = ()
    ports: tuple[int, ...] = ()
    snis: tuple[str, ...] = ()
    groups: tuple[int, ...] = ()
    versions: tuple[int, ...] = ()

    @classmethod
    def parse(cls, hosts: list[str] | None = None, ports: list[str] | None = None,
              snis: list[str] | None = None, groups: list[str] | None = None,
              versions: list[str] | None = None) -> ConnectionFilter:
        """Build from command-line values (each may hold a comma-separated list). Raises
        ValueError with a one-line message on a bad value."""
        def split(values: list[str] | None) -> list[str]:
            return [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]
        port_list = []
        for p in split(ports):
            if not p.isdigit() or not 0 <= int(p) <= 65535:
                raise ValueError(f"--port: bad port {p!r} (0..65535)")
            port_list.append(int(p))
        try:
            version_list = tuple(parse_version(v) for v in split(versions))
        except ValueError as exc:
            raise ValueError(f"--tls-version: {exc}") from None
        return cls(tuple(parse_host(h) for h in split(hosts)), tuple(port_list),
                   tuple(s.lower() for s in split(snis)),
                   tuple(parse_group_id(g) for g in split(groups)), version_list)

    @property
    def active(self) -> bool:
        return bool(self.hosts or self.ports or self.snis or self.groups or self.versions)

    def matches(self, r: ConnectionReport) -> bool:
        sni = (r.sni or "").lower()
        if self.hosts and not any(_host_matches(r, sni, h, port) for h, port in self.hosts):
            return False
        if self.ports and r.client_port not in self.ports and r.server_port not in self.ports:
            return False
        if self.snis and not any(fnmatchcase(sni, pattern) for pattern in self.snis):
            return False
        if self.groups:
            group = r.group
            hrr = r.hello_retry_request
            if (group is None or group.id not in self.groups) and \
                    (hrr is None or hrr.id not in self.groups):
                return False
        return not self.versions or (r.version is not None and r.version.id in self.versions)


def _host_matches(r: ConnectionReport, sni: str, host: str, port: int | None) -> bool:
    """An endpoint with this address (and port, when given), or the SNI (and server port)."""
    if port is None:
        return host == r.client_ip or host == r.server_ip or bool(sni and host == sni)
    return (host == r.client_ip and port == r.client_port) or \
        (port == r.server_port and (host == r.server_ip or bool(sni and host == sni)))
