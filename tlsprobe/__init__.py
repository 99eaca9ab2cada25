"""tlsprobe: show exactly how a TLS server negotiates its key exchange.

The Python API (docs/API.md) is `tlsprobe.probe`, `aprobe`, `scan`, `ascan`, `read_capture`,
`capture_live`,
`simulate_clients`, `speed` and `timing`, with the model types they return and the errors they raise; it lives in
`tlsprobe.api` and is imported on first use (module `__getattr__`), so that
`import tlsprobe` and `tlsprobe --help` stay cheap (tests/project/test_startup.py).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

# the one place the version is set (pyproject.toml reads it too)
from tlsprobe._version import __version__

__all__ = [
    "AuditReport", "CaptureReader", "CaptureSummary", "ClientSimulation", "ClientsReport",
    "ConnectionReport", "FailureKind", "LiveCaptureReader", "ProbeError", "ProbeResult",
    "SpeedReport", "TimingReport", "TlsprobeError", "UnreadableInput", "UsageError",
    "__version__", "aprobe", "ascan", "capture_live", "failure_kind", "probe", "read_capture",
    "scan", "simulate_clients", "speed", "timing"]
#: the names `tlsprobe.api` exports, read from it on first access
_API = frozenset(__all__) - {"__version__"}

if TYPE_CHECKING:   # for type checkers and IDEs; at run time `__getattr__` imports them
    from tlsprobe.api import AuditReport as AuditReport
    from tlsprobe.api import CaptureReader as CaptureReader
    from tlsprobe.api import CaptureSummary as CaptureSummary
    from tlsprobe.api import ClientSimulation as ClientSimulation
    from tlsprobe.api import ClientsReport as ClientsReport
    from tlsprobe.api import ConnectionReport as ConnectionReport
    from tlsprobe.api import FailureKind as FailureKind
    from tlsprobe.api import LiveCaptureReader as LiveCaptureReader
    from tlsprobe.api import ProbeError as ProbeError
    from tlsprobe.api import ProbeResult as ProbeResult
    from tlsprobe.api import SpeedReport as SpeedReport
    from tlsprobe.api import TimingReport as TimingReport
    from tlsprobe.api import TlsprobeError as TlsprobeError
    from tlsprobe.api import UnreadableInput as UnreadableInput
    from tlsprobe.api import UsageError as UsageError
    from tlsprobe.api import aprobe as aprobe
    from tlsprobe.api import ascan as ascan
    from tlsprobe.api import capture_live as capture_live
    from tlsprobe.api import failure_kind as failure_kind
    from tlsprobe.api import probe as probe
    from tlsprobe.api import read_capture as read_capture
    from tlsprobe.api import scan as scan
    from tlsprobe.api import simulate_clients as simulate_clients
    from tlsprobe.api import speed as speed
    from tlsprobe.api import timing as timing


def __getattr__(name: str) -> object:
    """A name of the Python API, imported from `tlsprobe.api` when first asked for."""
    if name in _API:
        from tlsprobe import api
        value: object = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tlsprobe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _API)


class _Package(ModuleType):
    """The package's module type: `tlsprobe.speed` stays the API's function although
    `tlsprobe/speed/` is a subpackage, whose import would rebind the name to the module
    (`from tlsprobe.speed import ...` still imports the subpackage: imports go through
    `sys.modules`)."""

    @property
    def speed(self) -> Any:
        """`tlsprobe.api.speed` (or what a test patched in)."""
        patched = vars(self).get("_speed")
        if patched is not None:
            return patched
        from tlsprobe.api import speed
        return speed

    @speed.setter
    def speed(self, value: Any) -> None:
        if not isinstance(value, ModuleType):   # the import system binding the subpackage
            vars(self)["_speed"] = value


sys.modules[__name__].__class__ = _Package
