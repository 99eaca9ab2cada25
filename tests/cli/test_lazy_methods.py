"""commands/lazy_methods.py: dataclass methods compiled on first use during a command's
imports behave exactly as the ones `dataclasses` compiles at once (issue 35's start-up).

The same class source is made twice, once plainly and once inside `deferred()`, in a module
named like tlsprobe's (the deferral applies to tlsprobe's own modules only), and every
generated method is compared: `__init__` (positional, keyword, defaults, default factories,
`__post_init__`), `__repr__`, `__eq__`, `__hash__`, the frozen `__setattr__`/`__delattr__`
errors, a class without a docstring (whose docstring `dataclasses` writes from the
signature), a slotted class and a plain subclass that inherits the methods.
"""
from __future__ import annotations

import dataclasses
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from tlsprobe.commands.lazy_methods import deferred

SOURCE = '''
from __future__ import annotations
from dataclasses import dataclass, field

@dataclass(frozen=True)
class Point:
    """A frozen class with defaults and a factory."""
    x: int
    y: int = 2
    tags: tuple[str, ...] = field(default_factory=tuple)
    note: str = field(default="n", compare=False)

@dataclass(frozen=True)
class NoDoc:
    a: int
    b: str = "b"
    c: tuple[int, ...] = field(default_factory=tuple)
    d: int = field(default=4, kw_only=True)
    e: list[int] = field(default_factory=list, kw_only=True)

@dataclass
class Mutable:
    """A mutable class with __post_init__ (eq, no hash)."""
    items: list[int] = field(default_factory=list)
    total: int = 0

    def __post_init__(self) -> None:
        self.total = sum(self.items)

@dataclass(frozen=True, slots=True)
class Slotted:
    """A slotted frozen class."""
    name: str
    size: int = 0

class Child(Point):
    """A plain subclass: inherits Point's methods."""
'''


def _module(name: str, lazy: bool) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = f"/nonexistent/{name.rsplit('.', 1)[1]}.py"
    sys.modules[name] = module
    try:
        if lazy:
            with deferred():
                exec(compile(SOURCE, module.__file__, "exec"), module.__dict__)  # noqa: S102 - the test source
        else:
            exec(compile(SOURCE, module.__file__, "exec"), module.__dict__)  # noqa: S102 - the test source
    finally:
        del sys.modules[name]
    return module


def _behaviour(m: types.ModuleType) -> list[Any]:
    """What every generated method gives, as plain values."""
    out: list[Any] = []
    p, q = m.Point(1), m.Point(1, 2, ("t",), note="other")
    out += [repr(p), repr(q), p == m.Point(1, note="x"), p == q, p != q, hash(p) == hash(
        m.Point(1)), hash(p), hash(q), p == (1, 2)]
    actions: list[Callable[[], None]] = [lambda: setattr(p, "x", 5),
                                         lambda: delattr(p, "y"), lambda: setattr(p, "new", 1)]
    for action in actions:
        with pytest.raises(dataclasses.FrozenInstanceError) as err:
            action()
        out.append(str(err.value))
    c = m.Child(3, tags=("a",))
    out += [repr(c), c == m.Child(3, tags=("a",)), c == m.Point(3, tags=("a",)), hash(c)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.x = 1
    out += [m.NoDoc.__doc__, str(inspect.signature(m.NoDoc)), repr(m.NoDoc(1)),
            m.NoDoc(1) == m.NoDoc(1, "b"), repr(m.NoDoc(2, "x", (3,), d=5, e=[6]))]
    mu = m.Mutable([1, 2, 3])
    mu.total = 7
    out += [repr(mu), mu.total, m.Mutable([1]) == m.Mutable([1]), m.Mutable.__hash__]
    s = m.Slotted("s")
    out += [repr(s), s == m.Slotted("s", 0), hash(s), m.Slotted.__slots__]
    with pytest.raises(TypeError):
        m.Point()
    with pytest.raises(TypeError):
        m.Point(1, 2, (), "n", 5)
    names = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")
    out += [(cls, name, getattr(getattr(m, cls), name).__qualname__)
            for cls in ("Point", "NoDoc", "Slotted") for name in names
            if name in vars(getattr(m, cls))]
    return out


def test_deferred_methods_behave_as_eager_ones() -> None:
    eager = _module("tlsprobe._lazy_probe_eager", lazy=False)
    lazy = _module("tlsprobe._lazy_probe_lazy", lazy=True)
    # deferred: the class holds a stand-in until the first call ...
    assert lazy.Point.__dict__["__eq__"].__code__ is not eager.Point.__dict__["__eq__"].__code__
    assert lazy.Point.__dict__["__eq__"].__code__.co_name == "method"
    assert _behaviour(lazy) == _behaviour(eager)
    # ... then the function dataclasses makes: later calls cost what they always did
    for name in ("__init__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        assert lazy.Point.__dict__[name].__code__.co_name == name, name
        assert lazy.Point.__dict__[name].__qualname__ == f"Point.{name}"
    # a class without a docstring: its docstring, written from the signature, is the same
    assert lazy.NoDoc.__doc__ == eager.NoDoc.__doc__ == (
        "NoDoc(a: 'int', b: 'str' = 'b', c: 'tuple[int, ...]' = <factory>, *, d: 'int' = 4, "
        "e: 'list[int]' = <factory>)")


def test_deferral_is_for_tlsprobe_modules_only() -> None:
    other = types.ModuleType("elsewhere")
    other.__file__ = "/nonexistent/elsewhere.py"
    sys.modules["elsewhere"] = other
    try:
        with deferred():
            exec(compile(SOURCE, other.__file__, "exec"), other.__dict__)  # noqa: S102 - the test source
    finally:
        del sys.modules["elsewhere"]
    assert other.Point.__dict__["__eq__"].__code__.co_name == "__eq__"
    # and outside the block dataclasses is itself again
    hook = "_create_fn"
    assert getattr(dataclasses, hook).__module__ == "dataclasses"
