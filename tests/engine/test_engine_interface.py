"""Nothing outside engine/ reads ClientHandshake's state (issue 31 item 1).

The engine's public interface is what engine/interface.py declares (`Handshake`, its names
in `INTERFACE`); its state is private. This test takes the instance attributes of a real
ClientHandshake after a whole handshake (the RFC 8448 one: hello, encrypted flight,
Finished, application data both ways, a NewSessionTicket) and walks the syntax tree of
every module of tlsprobe/ outside engine/: none may read one of those attributes, none may
subclass ClientHandshake (a subclass reads the state through `self`), and the public names
ClientHandshake has are exactly the declared interface, each of them used outside engine/.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.engine import engine_rfc8448 as v
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tlsprobe import kex
from tlsprobe.engine.client import ClientHandshake
from tlsprobe.engine.config import BuiltHello, ClientConfig
from tlsprobe.engine.interface import INTERFACE, Waiting
from tlsprobe.engine.protection import Tls13Protection
from tlsprobe.kex.ecdh import XShare
from tlsprobe.wire.hello import ClientHello
from tlsprobe.wire.messages import NewSessionTicket

PACKAGE = Path(__file__).resolve().parents[2] / "tlsprobe"


def _record(content_type: int, body: bytes) -> bytes:
    return bytes([content_type]) + b"\x03\x03" + len(body).to_bytes(2, "big") + body


@pytest.fixture(scope="module")
def handshake() -> ClientHandshake:
    """A ClientHandshake that ran the whole RFC 8448 handshake and a little more."""
    private = X25519PrivateKey.from_private_bytes(v.CLIENT_X25519_PRIVATE)
    share = XShare(kex.REGISTRY[0x001D], private)  # type: ignore[arg-type]
    built = BuiltHello(ClientHello.parse(v.CLIENT_HELLO[4:]), {0x001D: share})
    hs = ClientHandshake(ClientConfig(versions=(0x0304,), groups=(0x001D,)),
                         stop_after_first_flight=False, prebuilt=built)
    hs.start()
    hs.receive(_record(22, v.SERVER_HELLO) + v.SERVER_HANDSHAKE_RECORD)
    assert hs.handshake_complete and hs.waiting_for is Waiting.CONNECTED
    hs.send_application_data(v.APPLICATION_PAYLOAD)
    ticket = NewSessionTicket(30, b"\x2c" * 16, 0x12345678, b"\x00\x00").to_bytes()
    nst = Tls13Protection("AES-128-GCM", v.SERVER_AP_KEY, v.SERVER_AP_IV).encrypt(22, ticket)
    hs.receive(nst + v.SERVER_APPLICATION_RECORD)
    assert hs.application_data == v.APPLICATION_PAYLOAD
    hs.close()
    return hs


@functools.cache
def _modules_outside_engine() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent)
        if rel.parts[1] == "engine":
            continue
        out.append((str(rel), ast.parse(path.read_text(encoding="utf-8"), str(rel))))
    assert len(out) > 150, "the walk found too few modules: wrong package path?"
    return out


def _reads(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, attribute, the expression it is read from) of every attribute access that is
    not on `self` or `cls` (a class's own attributes are its own business)."""
    return [(node.lineno, node.attr, ast.unparse(node.value)) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))]


def test_no_module_outside_engine_reads_the_handshake_state(
        handshake: ClientHandshake) -> None:
    state = set(vars(handshake))
    assert {"_server_hello", "_flight", "_hellos", "_events"} <= state, sorted(state)
    found = [f"{name}:{line}: {base}.{attr}"
             for name, tree in _modules_outside_engine()
             for line, attr, base in _reads(tree) if attr in state]
    assert not found, "ClientHandshake state read outside engine/ (use the interface, " \
        "engine/interface.py):\n" + "\n".join(found)


def test_nothing_outside_engine_subclasses_the_handshake() -> None:
    found = [f"{name}:{node.lineno}: class {node.name}"
             for name, tree in _modules_outside_engine() for node in ast.walk(tree)
             if isinstance(node, ast.ClassDef)
             and any(ast.unparse(base).split(".")[-1] == "ClientHandshake"
                     for base in node.bases)]
    assert not found, found


def test_the_public_names_are_the_declared_interface(handshake: ClientHandshake) -> None:
    public = {name for name in dir(ClientHandshake) if not name.startswith("_")}
    assert public == INTERFACE, (f"undeclared: {sorted(public - INTERFACE)}; "
                                 f"declared, missing: {sorted(INTERFACE - public)}")
    assert not {name for name in vars(handshake) if not name.startswith("_")}
    used = {attr for _, tree in _modules_outside_engine() for _, attr, _ in _reads(tree)}
    assert INTERFACE <= used, f"declared but used nowhere: {sorted(INTERFACE - used)}"


#: the state machine's insides: the version halves hold the secrets, `state` the fields
INTERNAL = ("tlsprobe.engine.state", "tlsprobe.engine.tls12", "tlsprobe.engine.tls13",
            "tlsprobe.engine.records", "tlsprobe.engine.verdict", "tlsprobe.engine.guards")


def test_the_state_machine_insides_are_not_imported_outside_engine() -> None:
    """A version half imported outside engine/ is its state read another way (the QUIC
    connection and the resumption checks read Tls13Client.ks and Tls12Client.master_secret;
    session_keys() says it now)."""
    found = [f"{name}:{node.lineno}: {node.module}"
             for name, tree in _modules_outside_engine() for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and (node.module in INTERNAL or any(
                 f"{node.module}.{alias.name}" in INTERNAL for alias in node.names))]
    found += [f"{name}:{node.lineno}: {alias.name}"
              for name, tree in _modules_outside_engine() for node in ast.walk(tree)
              if isinstance(node, ast.Import) for alias in node.names
              if alias.name in INTERNAL]
    assert not found, found
