"""Shared helpers for the wire parsers: annotation value strings and annotated vector reads.

Value strings follow one style so the trace reads uniformly: code points as
``"x25519 (0x001d)"``, one-byte enums as ``"named_curve (3)"``, length prefixes as
``"32 (0x20)"`` and opaque data as ``"32 bytes"``. Names come from `tlsprobe.registry`,
imported lazily so that parsing without annotations never touches it (each under a name of
its own: compiled, a function's import binds the module's global, and one name `label`
shared by five functions could be rebound by another thread between an import and its
call); every name function there is total (unknown and GREASE
values get a hex or "GREASE" name), so labels never fail.
"""

from __future__ import annotations

from collections.abc import Callable

from tlsprobe.escaping import escaped_bytes, quoted_bytes, quoted_text, wire_text

from .buffer import Buffer

#: the one escaping style of network and file text lives in tlsprobe/escaping.py (policy/ and
#: model/ use it too, and may not import wire/); re-exported for the wire's modules
__all__ = ["escaped_bytes", "quoted_bytes", "quoted_text", "wire_text"]

def group_label(value: int) -> str:
    from tlsprobe.registry import group_label as registry_group_label
    return registry_group_label(value)


def suite_label(value: int) -> str:
    from tlsprobe.registry import suite_label as registry_suite_label
    return registry_suite_label(value)


def sigscheme_label(value: int) -> str:
    from tlsprobe.registry import sigscheme_label as registry_sigscheme_label
    return registry_sigscheme_label(value)


def extension_label(value: int) -> str:
    from tlsprobe.registry import extension_label as registry_extension_label
    return registry_extension_label(value)


def version_label(value: int) -> str:
    from tlsprobe.registry import version_label as registry_version_label
    return registry_version_label(value)


def handshake_label(value: int) -> str:
    from tlsprobe.registry import handshake_name
    return f"{handshake_name(value)} ({value})"


def alert_label(value: int) -> str:
    from tlsprobe.registry import alert_name
    return f"{alert_name(value)} ({value})"


def enum_label(names: dict[int, str], value: int) -> str:
    """A small local enum (curve_type, compression, PSK modes...): ``"name (value)"``."""
    name = names.get(value)
    return f"{name} ({value})" if name else str(value)


def length_label(n: int) -> str:
    return f"{n} (0x{n:x})"


def bytes_label(n: int) -> str:
    return f"{n} bytes"


def _rel(buf: Buffer, name: str) -> str:
    """Path component for `name` ("client_shares[0].group") inside an open field of the
    same list ("client_shares"): just "[0].group", so error paths do not repeat it."""
    head = name.split("[", 1)[0]
    return name[len(head):] if "[" in name and buf.path.endswith(head) else name


def pull_uint_noted(buf: Buffer, size: int, name: str,
                    label: Callable[[int], str] | None = None) -> int:
    """Read a fixed-size integer and annotate it (value through `label`, default decimal)."""
    start = buf.tell()
    with buf.field(_rel(buf, name)):
        value = buf.pull_uint(size)
    if buf.annotations is not None:
        buf.note(name, start, size, label(value) if label else str(value))
    return value


def pull_opaque(buf: Buffer, len_size: int, name: str, *, minimum: int = 0,
                maximum: int | None = None) -> bytes:
    """Read ``opaque name<minimum..maximum>`` and annotate its length and its bytes."""
    start = buf.tell()
    with buf.field(_rel(buf, name)):
        data = buf.pull_vector(len_size, minimum=minimum, maximum=maximum)
    if buf.annotations is not None:
        buf.note(f"{name}_length", start, len_size, length_label(len(data)), "len")
        buf.note(name, start + len_size, len(data), bytes_label(len(data)), "bytes")
    return data


def note_length(buf: Buffer, name: str, start: int, len_size: int, n: int) -> None:
    """Annotate a block's length prefix (for lists read with `Buffer.block`)."""
    buf.note(f"{name}_length", start, len_size, length_label(n), "len")


def pull_list(buf: Buffer, len_size: int, item_size: int, name: str,
              label: Callable[[int], str] | None = None, *, minimum: int = 0,
              maximum: int | None = None) -> list[int]:
    """A vector of fixed-size integers (``NamedGroup named_group_list<2..2^16-1>``)."""
    start = buf.tell()
    items: list[int] = []
    with buf.field(name), buf.block(len_size, minimum=minimum, maximum=maximum) as n:
        if n % item_size:
            raise buf.error(f"length {n} is not a multiple of {item_size}", start)
        note_length(buf, name, start, len_size, n)
        while not buf.eof():
            at = buf.tell()
            value = buf.pull_uint(item_size)
            if buf.annotations is not None:
                buf.note(f"{name}[{len(items)}]", at, item_size,
                         label(value) if label else str(value))
            items.append(value)
    return items
