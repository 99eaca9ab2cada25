"""The bound on a QUIC epoch's CRYPTO data is tlsprobe's own (RFC 9000 7.5 lets a client
bound its buffer), as --max-message is over TCP: a server sending a large certificate chain
over QUIC breaks no rule. Within --max-message the handshake completes (ngtcp2 serving an
85 KB chain, past the 64 KiB a QUIC epoch was once limited to); past the bound it is a limit
error (exit 8, naming the option), never the server's protocol error (exit 6), and our
CONNECTION_CLOSE says CRYPTO_BUFFER_EXCEEDED (0xd)."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers.servers import CertSet
from tests.lab_servers.certs import signed_leaf
from tests.quic.conftest import Peer, _start_ngtcp2, _stop
from tlsprobe.errors import EXIT_LIMIT, EXIT_OK
from tlsprobe.net import quic_wire as w
from tlsprobe.session.flow import MAX_MESSAGE


def test_a_large_chain_over_quic_is_read_as_over_tcp(certs: CertSet, tmp_path: Path,
                                                     run_cli: Callable[..., Any]) -> None:
    big = signed_leaf(certs, tmp_path, "big", "ecdsa", 30, extra_names=3500)
    server = _start_ngtcp2(CertSet(certs.directory, certs.ca, {"ecdsa": big}),
                           "-GROUP-ALL:+GROUP-X25519", False)
    try:
        res = run_cli(server.target, "--quic", "--cafile", certs.ca, "--timeout", "5",
                      "--json", timeout=60)
        assert res.returncode == EXIT_OK, res.stderr
        report = json.loads(res.stdout)
        assert report["handshake_complete"] and report["finished_verified"]
        assert report["quic"]["closed_by_us"] == 0
        assert len(report["certificates"][0]["san"]) == 3502   # the whole leaf was read
        limited = run_cli(server.target, "--quic", "--cafile", certs.ca, "--timeout", "5",
                          "--max-message", "65536", "--json", timeout=60)
    finally:
        _stop(server.process)
    assert limited.returncode == EXIT_LIMIT, limited.stderr
    [line] = limited.stderr.strip().splitlines()
    assert "over tlsprobe's limit" in line and "--max-message raises it" in line, line
    assert json.loads(limited.stdout)["error_kind"] == "limit"


def _cids(datagram: bytes) -> tuple[bytes, bytes]:
    dcid = datagram[6:6 + datagram[5]]
    p = 6 + len(dcid)
    return dcid, datagram[p + 1:p + 1 + datagram[p]]


def _server_initial(datagram: bytes, frames: bytes) -> bytes:
    dcid, scid = _cids(datagram)
    header = w.long_header(0, scid, b"\x05" * 8, 0, len(frames), b"")
    return w.seal(w.PacketKeys.initial(dcid, "server"), header, 0, 2, frames)


def _close_codes(got: list[bytes]) -> list[int]:
    """The error codes of the CONNECTION_CLOSE frames in our Initial packets."""
    keys = w.PacketKeys.initial(_cids(got[0])[0], "client")
    return [f.error for d in got for p in w.split_datagram(d, 8)
            for f in w.parse_frames(w.unprotect(keys, p.data, p.pn_offset, -1)[1])
            if f.type == 0x1C]


def _limited(udp_peer: Peer, run_cli: Callable[..., Any], frames: bytes) -> str:
    sock, got, answers = udp_peer
    answers.append(lambda d: _server_initial(d, frames) if d == got[0] else b"")
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "5",
                  "--json", timeout=30)
    assert res.returncode == EXIT_LIMIT, res.stderr
    assert json.loads(res.stdout)["error_kind"] == "limit"
    assert _close_codes(got.complete()) == [0xD]   # CRYPTO_BUFFER_EXCEEDED, once
    [line] = res.stderr.strip().splitlines()
    return line


def test_crypto_data_past_the_bound_is_a_limit_error(udp_peer: Peer,
                                                    run_cli: Callable[..., Any]) -> None:
    end = w.crypto_limit(MAX_MESSAGE)
    line = _limited(udp_peer, run_cli, w.crypto_frame(end - 2, b"abcd"))
    assert line.endswith(f"server's Initial CRYPTO data is over tlsprobe's limit: beyond "
                         f"{end} bytes in one packet number space (--max-message raises it)")


def test_too_many_crypto_gaps_are_a_limit_error(udp_peer: Peer,
                                               run_cli: Callable[..., Any]) -> None:
    frames = b"".join(w.crypto_frame(10 + 3 * i, b"x") for i in range(w.MAX_RANGES + 1))
    line = _limited(udp_peer, run_cli, frames)
    assert line.endswith(f"more than {w.MAX_RANGES} out-of-order ranges waiting (a fixed "
                         "bound, docs/LIMITS.md)")


def test_max_records_counts_the_servers_quic_packets(quic_server: Any,
                                                     run_cli: Callable[..., Any]) -> None:
    # over QUIC the engine's records are tlsprobe's own framing of CRYPTO data: --max-records
    # bounds the server's QUIC packets with CRYPTO data, and the line says so. aioquic's
    # Handshake packet (after its Initial with the ServerHello) is past --max-records 1.
    server = quic_server("x25519,secp256r1")
    res = run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--max-records", "1", "--json", timeout=60)
    assert res.returncode == EXIT_LIMIT, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.endswith("server sent more than 1 QUIC packets with CRYPTO data, tlsprobe's "
                         "limit (--max-records, which counts them over QUIC, raises it)"), line
    report = json.loads(res.stdout)
    assert report["error_kind"] == "limit"
    assert report["quic"]["closed_by_us"] == 0x100 + 80    # internal_error, as over TCP
    # the server's packets with CRYPTO data (listed by --msg) are what is counted: a limit
    # just above their number (another run may split its data otherwise) lets it through
    full = run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5",
                   "--msg", timeout=60)
    assert full.returncode == EXIT_OK, full.stderr
    received = sum(line.startswith("< ") and "CRYPTO(" in line
                   for line in full.stdout.splitlines())
    # (twice their number: on a loaded machine our ACKs come late and aioquic sends its
    # Handshake flight again, CI run of s29: 3 packets, then more than 5)
    enough = run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5",
                     "--max-records", str(2 * received + 2), timeout=60)
    assert enough.returncode == EXIT_OK, enough.stderr
