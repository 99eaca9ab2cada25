"""The Python API's argument check: each value against its parameter's annotation.

`docs/API.md` promises that every exception of the API is a `TlsprobeError`. A value of the
wrong type (`timeout="5"`, `groups=5`, `probe(123)`) went deep into the code and came out
as a TypeError or AttributeError; `checked` turns it into a `UsageError` naming the
function, the parameter, what it takes and what it got, before any work. The annotations
are the rule (one source: what mypy checks is what runs), read once per function.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import os
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, Union

from tlsprobe.errors import OPTIONS_SPELLING, UsageError

__all__ = ["checked"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _accepts(value: object, hint: object) -> bool:
    """Whether `value` fits `hint` (the forms the API's signatures use). A str is taken
    where a sequence of names is (one name), as the functions themselves do."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_accepts(value, arg) for arg in typing.get_args(hint))
    if hint is None or hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is collections.abc.Sequence:
        (item,) = typing.get_args(hint) or (Any,)
        if isinstance(value, str):
            return _accepts(value, item)
        return isinstance(value, collections.abc.Sequence) and not isinstance(
            value, (bytes, bytearray)) and all(_accepts(v, item) for v in value)
    if origin is collections.abc.Callable:
        return callable(value)
    kind = origin or hint
    if isinstance(kind, type):
        return isinstance(value, kind)
    return True


def _describe(hint: object) -> str:
    """`hint` in words: 'a number', 'a str or None', 'a sequence of (str or int)'."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if hint is None or hint is type(None):
        return "None"
    if hint is float:
        return "a number"
    if origin is collections.abc.Sequence:
        (item,) = typing.get_args(hint) or (Any,)
        return f"a list of {_bare(item)}"
    if origin is collections.abc.Callable:
        return "a function"
    name = _bare(hint)
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def _bare(hint: object) -> str:
    """A type's name without article: 'str or int', 'path'."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_bare(arg) for arg in typing.get_args(hint))
    if hint is float:
        return "number"
    if typing.get_origin(hint) is os.PathLike or hint is os.PathLike:
        return "path"
    return str(getattr(hint, "__name__", hint))


#: the parameters that name files or folders: an empty name is no file (it was read as
#: the current folder, or as a file '' that is not there), as the command line's options
PATHS = frozenset({"path", "cafile", "keylog", "profiles_dir", "policies"})


def _empty_name(value: object) -> bool:
    """Whether `value` (a name, a path, or a list of names) holds an empty name."""
    if isinstance(value, (list, tuple)):
        return any(_empty_name(item) for item in value)
    return isinstance(value, (str, os.PathLike)) and not os.fspath(value).strip()


def checked(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """`func` with its arguments checked against its annotations first (UsageError), run
    with the API's spelling of inputs (errors.spelt: a hint names `xmpp_host`, not
    `--xmpp-host`); a coroutine function's coroutine sets it where it runs."""
    signature = inspect.signature(func)
    hints: dict[str, object] = {}
    is_coroutine = inspect.iscoroutinefunction(func)

    @functools.wraps(func)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        _check(func, signature, hints, args, kwargs)
        token = OPTIONS_SPELLING.set(False)
        try:
            result = func(*args, **kwargs)
        finally:
            OPTIONS_SPELLING.reset(token)
        if is_coroutine:
            return typing.cast(_R, _api_spelt(typing.cast(Awaitable[object], result)))
        return result
    return call


async def _api_spelt(coroutine: Awaitable[object]) -> object:
    """`coroutine`'s result, awaited with the API's spelling in its task's context."""
    token = OPTIONS_SPELLING.set(False)
    try:
        return await coroutine
    finally:
        OPTIONS_SPELLING.reset(token)


def _check(func: Callable[..., object], signature: inspect.Signature,
           hints: dict[str, object], args: tuple[object, ...], kwargs: dict[str, object]
           ) -> None:
    """A UsageError for the first argument of `func` that does not fit its annotation."""
    if not hints:
        hints.update(typing.get_type_hints(func))
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise UsageError(f"{func.__name__}(): {exc}") from None
    for name, value in bound.arguments.items():
        hint = hints.get(name)
        if hint is not None and not _accepts(value, hint):
            shown = repr(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise UsageError(f"{func.__name__}(): {name} must be {_describe(hint)}, "
                             f"not {type(value).__name__} {shown}")
        if name in PATHS and _empty_name(value):
            raise UsageError(f"{func.__name__}(): {name}: an empty name: give the "
                             "file's or folder's name")
