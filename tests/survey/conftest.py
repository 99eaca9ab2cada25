"""Fixtures for the survey tests: a lab of real TLS servers on several loopback addresses
(127.0.0.1-127.0.0.3, two ports on some, known group configurations), one refused port, and
one Dask LocalCluster (two worker processes) per module.

tests/helpers/servers.py binds only 127.0.0.1 / ::1; a survey shards by address, so the lab starts
the same lab servers (lab_servers.builders) on other 127.0.0.x loopback addresses here."""
from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.lab_servers.builders import ServerConfig
from tests.helpers.servers import CertSet, Server, ServerStartError, launch_once, missing_reason, \
    peer_unavailable


@dataclass(frozen=True)
class LabServer:
    """One server of the lab and what the survey must find there."""

    host: str
    port: int
    tls13: bool
    tls12: bool
    preferred: dict[str, str | None]    # version name -> preferred group (None: no preference)
    supported: dict[str, list[str]]     # version name -> groups in the server's order
    pq: str                             # the target's post-quantum verdict

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _start(config: ServerConfig, certs: CertSet, workdir: Path) -> Server:
    reason = missing_reason(config.impl)
    if reason:
        peer_unavailable(reason)
    tail = ""
    for _attempt in range(3):   # a free port can be taken between probing and binding it
        wd = Path(tempfile.mkdtemp(prefix=f"{config.impl}-{config.host}-", dir=workdir))
        got = launch_once(config, _free_port(config.host), certs, wd)
        if isinstance(got, Server):
            return got
        tail = got
        if "in use" not in tail.lower():
            break
    raise ServerStartError(f"{config} did not listen: {tail}")


T13, T12 = "TLS 1.3", "TLS 1.2"

#: (config, expectations without host/port)
LAB = [
    # server order, a post-quantum hybrid first (the lab's pyOpenSSL server binds only
    # 127.0.0.1)
    (ServerConfig("pyopenssl", ("X25519MLKEM768", "X25519", "P-256"), serverpref=True,
                  host="127.0.0.1", proto="tls1_3"),
     dict(tls13=True, tls12=False, preferred={T13: "X25519MLKEM768"},
          supported={T13: ["X25519MLKEM768", "x25519", "secp256r1"]}, pq="yes")),
    (ServerConfig("openssl", ("P-384", "P-256"), serverpref=True, host="127.0.0.2"),
     dict(tls13=True, tls12=True, preferred={T13: "secp384r1", T12: "secp384r1"},
          supported={T13: ["secp384r1", "secp256r1"], T12: ["secp384r1", "secp256r1"]},
          pq="no")),
    # OpenSSL 3.0 picks the TLS 1.3 HelloRetryRequest group by its own list (see
    # test_scan_servers); without -serverpref TLS 1.2 follows the client (code order)
    (ServerConfig("openssl", ("X25519", "P-256"), host="127.0.0.3"),
     dict(tls13=True, tls12=True, preferred={T13: "x25519", T12: None},
          supported={T13: ["x25519", "secp256r1"], T12: ["secp256r1", "x25519"]}, pq="no")),
    (ServerConfig("openssl", ("P-256",), proto="tls1_2", host="127.0.0.3"),
     dict(tls13=False, tls12=True, preferred={T12: "secp256r1"},
          supported={T12: ["secp256r1"]}, pq="not_tested")),
]


@pytest.fixture(scope="session")
def lab(certs: CertSet, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[tuple[list[LabServer], str]]:
    """The lab servers and one refused target (127.0.0.4, nothing listens)."""
    workdir = tmp_path_factory.mktemp("survey-lab")
    started: list[Server] = []
    servers = []
    try:
        for config, expect in LAB:
            server = _start(config, certs, workdir)
            started.append(server)
            servers.append(LabServer(config.host, server.port, **expect))  # type: ignore[arg-type]
        yield servers, f"127.0.0.4:{_free_port('127.0.0.4')}"
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[str]:
    """A LocalCluster of two worker processes for this module; its scheduler address."""
    distributed = pytest.importorskip("distributed", reason="dask[distributed] not installed "
                                      "(pip install '.[cluster]')")
    import logging
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=logging.ERROR)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()
