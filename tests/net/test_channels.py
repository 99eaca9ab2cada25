"""Channels by interface (issue 31 item 3): every hook a caller uses on a transport or a
connector is declared in net/transport.py with a default, the TCP, STARTTLS and QUIC
transports and connectors subclass those protocols (so mypy --strict checks that they
conform: tests/test_typing.py), nothing asks a transport what it has (`getattr`,
`hasattr`, a forwarding `__getattr__`), and the QUIC form of a hello is the same whether
the probe or the audit builds it."""
from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import pytest

from tlsprobe.engine.config import TLS12, TLS13, ClientConfig
from tlsprobe.net.pacing import PacedConnector, Watched
from tlsprobe.net.quic import QuicTransport
from tlsprobe.net.quic_async import AsyncQuicConnector, AsyncQuicTransport
from tlsprobe.net.quic_hello import NO_SUITE, NO_TLS13
from tlsprobe.net.recording import AsyncRecorder, RecordingConnector
from tlsprobe.net.starttls_connect import AsyncStartTlsConnector
from tlsprobe.net.target import Target
from tlsprobe.net.tcp import Channel
from tlsprobe.net.tcp_async import AsyncTcpTransport, TcpConnector
from tlsprobe.net.transport import (AsyncConnector, AsyncTransport, NotApplicable, Recorder,
                                    Transport)
from tlsprobe.probes.quic import QuicSetup, quic_setup

PACKAGE = Path(__file__).resolve().parents[2] / "tlsprobe"
#: the modules that open, wrap or drive transports: no getattr/hasattr at all
CHANNEL_MODULES = ["net/transport.py", "net/tcp.py", "net/tcp_async.py", "net/quic.py",
                   "net/quic_async.py", "net/quic_hello.py", "net/starttls.py",
                   "net/starttls_connect.py", "net/recording.py", "net/pacing.py",
                   "net/driver.py", "probes/audit/scheduler.py", "probes/probe.py",
                   "probes/quic.py", "probes/checks/_shared.py"]
#: elsewhere in the packages that use live connections: no getattr/hasattr whose object is
#: named like a transport or a connector (capture/ and offline/ read files, no channel)
LIVE = ("net/", "probes/", "commands/", "survey/", "api.py")
CHANNEL_NAME = re.compile(r"transport|connector|channel|stream|recorder|watched|\bconn\b|"
                          r"\bconnect\b|\binner\b", re.I)


def _reflection(path: Path) -> list[tuple[int, str]]:
    """(line, call) of every getattr/hasattr call and every forwarding `def __getattr__`
    (a method: a module's own `__getattr__`, PEP 562's lazy attribute of a module outside
    the channel modules, forwards nothing)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_level = {id(node) for node in tree.body}
    channel = path.relative_to(PACKAGE).as_posix() in CHANNEL_MODULES
    for node in ast.walk(tree):
        if id(node) in module_level and not channel and \
                isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "hasattr") and node.args:
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name == "__getattr__":
            found.append((node.lineno, "def __getattr__"))
    return found


def test_no_reflection_on_transports_or_connectors() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        for line, call in _reflection(path):
            if name == "__init__.py" and call == "def __getattr__":
                continue    # the package root's lazy API, no transport
            first = call.split("(", 1)[1].split(",", 1)[0] if "(" in call else call
            if name in CHANNEL_MODULES or call == "def __getattr__" or (
                    name.startswith(LIVE) and CHANNEL_NAME.search(first)):
                bad.append(f"tlsprobe/{name}:{line}: {call}")
    assert not bad, "reflection on a channel (declare the hook in net/transport.py):\n" + \
        "\n".join(bad)


@pytest.mark.parametrize("cls, protocol", [
    (Channel, Transport), (QuicTransport, Transport), (Recorder, Transport),
    (AsyncTcpTransport, AsyncTransport), (AsyncQuicTransport, AsyncTransport),
    (AsyncRecorder, AsyncTransport), (Watched, AsyncTransport),
    (TcpConnector, AsyncConnector), (AsyncQuicConnector, AsyncConnector),
    (AsyncStartTlsConnector, AsyncConnector), (RecordingConnector, AsyncConnector),
    (PacedConnector, AsyncConnector)])
def test_each_channel_implements_its_protocol(cls: type, protocol: type) -> None:
    # subclassing (not mere likeness) gives the hooks' defaults and mypy's conformance check
    assert protocol in cls.__mro__, f"{cls.__name__} does not subclass {protocol.__name__}"


def test_the_hooks_have_no_op_defaults() -> None:
    class Bare(AsyncConnector):
        async def __call__(self, target: Target, deadline: float) -> AsyncTransport:
            raise AssertionError("not called")

    config = ClientConfig()
    bare = Bare()
    assert bare.adapt(config) is config and bare.preamble(Target("a", 1)) is None
    # a wrapper passes the hooks on: QUIC's adapt reaches the scheduler through pacing
    quic = AsyncQuicConnector(1.0)
    paced = PacedConnector(RecordingConnector(quic, None), 10.0)  # type: ignore[arg-type]
    assert paced.adapt(ClientConfig(versions=(TLS12,))) == NotApplicable(NO_TLS13)
    assert paced.adapt(config) == quic.adapt(config)


def _both_ways(config: ClientConfig, alpn_given: bool = False
               ) -> tuple[ClientConfig | NotApplicable, ClientConfig | NotApplicable]:
    """The QUIC form of `config` as the probe builds it (probes/quic.py, `tlsprobe HOST
    --quic`, `probe(quic=True)`) and as the audit does (`scan --quic`: the connector's
    adapt), for the same connection IDs and versions."""
    setup = quic_setup(config, 5.0, alpn_given=alpn_given)
    connector = AsyncQuicConnector(5.0)
    if isinstance(setup, QuicSetup):
        connector.scid = setup.info.scid
        assert (connector.version, connector.offered) == (setup.info.version,
                                                          setup.info.offered)
        return setup.config, connector.adapt(config)
    return setup, connector.adapt(config)


def test_the_quic_hello_is_the_same_from_the_probe_and_the_scan() -> None:
    # an audit hello (no ALPN) with suites QUIC does not allow among those it does
    config = ClientConfig(server_name="localhost", versions=(TLS13, TLS12), alpn=(),
                          cipher_suites_13=(0x1305, 0x1302, 0x1304, 0x1301, 0x1303))
    probe, scan = _both_ways(config)
    assert isinstance(probe, ClientConfig) and probe == scan
    assert probe.versions == (TLS13,) and probe.alpn == ("h3",)
    assert probe.cipher_suites_13 == (0x1302, 0x1301, 0x1303)
    assert probe.session_ticket is False and probe.quic_transport_parameters
    # protocols the caller names are kept, both ways
    named = ClientConfig(server_name="localhost", alpn=("h3-29",))
    probe, scan = _both_ways(named, alpn_given=True)
    assert isinstance(probe, ClientConfig) and probe == scan and probe.alpn == ("h3-29",)
    # what QUIC cannot carry is refused both ways, for the same reason
    for config, reason in ((ClientConfig(versions=(TLS12,)), NO_TLS13),
                           (ClientConfig(cipher_suites_13=(0x1305,)), NO_SUITE)):
        assert _both_ways(config) == (NotApplicable(reason), NotApplicable(reason))


def test_pacing_is_net_s_and_keeps_the_per_host_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler's pacing lives in net/pacing.py (DESIGN.md: concurrency, per-host caps
    and rate limits are net/'s): at most `per_host` connections per host at once (names
    compared without case), starts `delay` apart (the waits asked of asyncio.sleep are
    checked, not the clock)."""
    import tlsprobe.net.pacing as pacing
    from tlsprobe.probes.audit.scheduler import Scheduler
    source = (PACKAGE / "probes/audit/scheduler.py").read_text(encoding="utf-8")
    assert not re.search(r"asyncio\.(Semaphore|Lock|sleep)", source)
    scheduler = Scheduler(per_host=2, delay=0.5)
    assert isinstance(scheduler.pacing, pacing.Pacing)
    assert (scheduler.pacing.per_host, scheduler.pacing.delay) == (2, 0.5)
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(pacing.asyncio, "sleep", sleep)
    open_now, most = 0, 0

    async def one(host: str) -> None:
        nonlocal open_now, most
        async with scheduler.pacing.slot(Target(host, 443)):
            open_now += 1
            most = max(most, open_now)
            for _ in range(3):
                await real_sleep(0)
            open_now -= 1

    async def main() -> None:
        await asyncio.gather(*(one("Example.TEST" if i % 2 else "example.test")
                               for i in range(6)))

    asyncio.run(main())
    assert most == 2
    # six starts on one host: the five after the first each waited (close to) 0.5 s more
    assert len(waits) == 5 and all(w > 0.4 for w in waits)
