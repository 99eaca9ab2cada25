"""Dataclass methods compiled on first use, for the classes a command's imports make.

`dataclasses` writes each method it generates (`__init__`, `__repr__`, `__eq__`,
`__hash__`, a frozen class's `__setattr__` and `__delattr__`) as source text and compiles it
when the class is made: about 0.5 ms a class here, a third of the instructions of a whole
`scan --groups-only` (138 classes), most of it for methods that never run (a frozen class's
`__setattr__` runs only to refuse an assignment; `__repr__`, `__eq__` and `__hash__` of most
types never during a scan). Inside `deferred()` (commands/common.py `start_up`) each such
method of tlsprobe's own classes is made by `dataclasses` itself, from the same arguments, the
first time it is called, and the class then holds that very function: later calls cost what
they always did, and behaviour is the same; only *when* the source is compiled changes.

For a class without a docstring `dataclasses` writes one from its `__init__`'s signature:
that stand-in carries the signature the real one will have (`__signature__`, read from the
parameters' text), so the docstring is the same. Made at once, as before: everything of a
class outside tlsprobe or in a compiled (mypyc) module, and everything on a Python whose
`dataclasses` this was not checked against (3.11 and 3.12; 3.13 compiles a class's methods
in one go, gh-109870).
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
from collections.abc import Callable, Iterator
from types import FrameType

_LAZY = frozenset({"__init__", "__repr__", "__eq__", "__hash__", "__setattr__",
                   "__delattr__"})
# dataclasses' private function every generated method goes through, in the versions checked
_HOOK = "_create_fn"
_ORIGINAL: Callable[..., Callable[..., object]] | None = (
    getattr(dataclasses, _HOOK, None) if sys.version_info[:2] in ((3, 11), (3, 12)) else None)
_PROCESS = getattr(dataclasses, "_process_class", None)


def _own(namespace: dict[str, object] | None) -> bool:
    """Whether generated code for this module's globals may wait: tlsprobe's, from source."""
    if namespace is None:
        return False
    return str(namespace.get("__name__", "")).startswith("tlsprobe.") and \
        str(namespace.get("__file__", "")).endswith(".py")


def _class_made() -> type | None:
    """The class `dataclasses._process_class` is making (a few frames up), else None."""
    code = getattr(_PROCESS, "__code__", None)
    frame: FrameType | None = sys._getframe(2)
    for _ in range(4):
        if frame is None or code is None:
            return None
        if frame.f_code is code:
            made = frame.f_locals.get("cls")
            return made if isinstance(made, type) else None
        frame = frame.f_back
    return None


def _install(owner: type, name: str, stub: object, real: Callable[..., object]) -> None:
    """Put `real` where `stub` is in `owner`'s classes (a subclass may be the one called)."""
    for klass in owner.__mro__:
        if klass.__dict__.get(name) is stub:
            real.__qualname__ = getattr(stub, "__qualname__", name)
            try:
                setattr(klass, name, real)
            except TypeError:    # an immutable type: the stub keeps calling `real`
                pass
            return


def _stub(name: str, make: Callable[[], Callable[..., object]]) -> Callable[..., object]:
    """A method that makes the real one on its first call, installs and calls it."""
    made: list[Callable[..., object]] = []

    def method(*args: object, **kwargs: object) -> object:
        if not made:
            made.append(make())
            _install(type(args[0]), name, method, made[0])
        return made[0](*args, **kwargs)

    method.__name__ = name
    return method


def _signature(args: object, names: dict[str, object] | None,
               return_type: object) -> inspect.Signature | None:
    """The signature the `__init__` written from `args` will have (`dataclasses` writes a
    class's missing docstring from it), read from the parameters' text and the names it
    binds them to; None when the text is not of the form this knows (then it is compiled)."""
    if not isinstance(args, (list, tuple)) or names is None or return_type is not None:
        return None
    params: list[inspect.Parameter] = []
    keyword_only = False
    empty = inspect.Parameter.empty
    try:
        for text in args:
            if text == "*":
                keyword_only = True
                continue
            head, _, default = str(text).partition("=")
            name, _, annotation = head.partition(":")
            params.append(inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY if keyword_only
                else inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=names[annotation] if annotation else empty,
                default=names[default] if default else empty))
        return inspect.Signature(params, return_annotation=None)
    except (KeyError, ValueError, TypeError):
        return None


def _create_fn(name: str, args: object, body: object, *, globals: dict[str, object] | None = None,
               locals: dict[str, object] | None = None,
               return_type: object = dataclasses.MISSING) -> Callable[..., object]:
    """dataclasses._create_fn, deferred for tlsprobe's classes (same arguments, same result)."""
    original = _ORIGINAL
    assert original is not None

    def make() -> Callable[..., object]:
        return original(name, args, body, globals=globals, locals=locals,
                        return_type=return_type)

    if name not in _LAZY or not _own(globals):
        return make()
    if name != "__init__":
        return _stub(name, make)
    made = _class_made()
    if made is None:
        return make()
    stub = _stub(name, make)
    if not made.__doc__:    # dataclasses writes the docstring from the signature
        signature = _signature(args, locals, return_type)
        if signature is None:
            return make()
        vars(stub)["__signature__"] = signature
    return stub


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within: tlsprobe's dataclasses get their generated methods on first use."""
    if _ORIGINAL is None or _PROCESS is None or getattr(dataclasses, _HOOK) is not _ORIGINAL:
        yield
        return
    setattr(dataclasses, _HOOK, _create_fn)
    try:
        yield
    finally:
        setattr(dataclasses, _HOOK, _ORIGINAL)
