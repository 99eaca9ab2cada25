"""A TLS 1.2 renegotiation read back with the client's key log: the new handshake (its
ClientHello and ServerHello read under the first handshake's keys) has keys of its own,
logged under its own client random, which each side takes at its next ChangeCipherSpec.
Real peers on loopback: openssl s_client's `R` command against s_server
-client_renegotiation (an abbreviated or full new handshake), and gnutls-cli --rehandshake
against gnutls-serv (a full one, with a client certificate request); tshark is the
independent reader of the same capture and key log."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.capbuild import TSHARK, pcap_jsonl

HTTP_GET = "GET / HTTP/1.0\r\n\r\n"


def _tshark_messages(pcap: Path, keys: Path) -> dict[int, list[str]]:
    """Handshake message types tshark reads (decrypting with `keys`) per client port."""
    assert TSHARK is not None
    out = subprocess.run([TSHARK, "-n", "-r", str(pcap), "-o", f"tls.keylog_file:{keys}",
                          "-Y", "tls.handshake.type", "-T", "fields", "-e", "tcp.srcport",
                          "-e", "tcp.dstport", "-e", "tls.handshake.type"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    got: dict[int, list[str]] = {}
    for line in out.splitlines():
        src, _dst, types = line.split("\t")
        got.setdefault(int(src), []).extend(types.split(","))
    return got


def _capture_renegotiations(tls_server: Any, live_pcap: Any, tmp_path: Path) -> tuple[
        Path, Path]:
    keys, pcap = tmp_path / "sslkeylog.txt", tmp_path / "reneg.pcapng"
    ossl = tls_server("openssl", proto="tls1_2", extra=("-client_renegotiation",))
    gnutls = tls_server("gnutls", proto="tls1_2")
    run = live_pcap(f"tcp port {ossl.port} or tcp port {gnutls.port}", "--jsonl",
                    "-w", str(pcap))
    client = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{ossl.port}",
                               "-tls1_2", "-keylogfile", str(keys)], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        assert client.stdin is not None
        time.sleep(1.0)
        client.stdin.write("R\n")          # its own read: s_client renegotiates
        client.stdin.flush()
        time.sleep(1.5)
        client.stdin.write(HTTP_GET)        # sent under the new handshake's keys
        client.stdin.flush()
        time.sleep(1.0)
        client.stdin.close()
        client.wait(20)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(5)
    done = subprocess.run(["gnutls-cli", "--insecure", "-p", str(gnutls.port), "127.0.0.1",
                           "--rehandshake"], check=False, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=20,
                          env=dict(os.environ, SSLKEYLOGFILE=str(keys)))
    assert "ReHandshake was completed" in done.stdout, done.stdout[-2000:]
    time.sleep(1.0)
    run.interrupt()
    code, _lines, err = run.finish()
    assert code == 0, err
    return pcap, keys


@pytest.mark.needs_impl("openssl", "gnutls")
def test_renegotiated_handshakes_decrypt_with_their_own_keys(
        tls_server: Any, live_pcap: Any, run_cli: Any, tmp_path: Path) -> None:
    pcap, keys = _capture_renegotiations(tls_server, live_pcap, tmp_path)
    code, conns, _captures, err = pcap_jsonl(run_cli, pcap, "--keylog", str(keys))
    assert code == 0, err
    assert len(conns) == 2, conns
    tshark = _tshark_messages(pcap, keys)
    for conn in conns:
        messages = conn["messages"]
        assert conn["decrypted"] is True and conn["handshake_complete"] is True, conn
        assert conn["problems"] == [], conn["problems"]
        # the renegotiation: a ClientHello read under the keys, then both Finished
        second = messages.index(">>> ClientHello (decrypted)")
        assert "<<< ServerHello (decrypted)" in messages[second:], messages
        assert ">>> Finished (decrypted)" in messages[second:], messages
        assert "<<< Finished (decrypted)" in messages[second:], messages
        # tshark reads the same messages from each side (types counted per sender)
        for arrow, port in ((">>>", conn["client_port"]), ("<<<", conn["server_port"])):
            ours = [m for m in messages if m.startswith(arrow)]
            assert len(ours) == len(tshark[port]), (ours, tshark[port])
        assert [a["name"] for a in conn["alerts"]] == ["close_notify", "close_notify"]


@pytest.mark.needs_impl("openssl", "gnutls")
def test_renegotiation_without_its_keys_is_said_not_malformed(
        tls_server: Any, live_pcap: Any, run_cli: Any, tmp_path: Path) -> None:
    pcap, keys = _capture_renegotiations(tls_server, live_pcap, tmp_path)
    _code, conns, _captures, err = pcap_jsonl(run_cli, pcap, "--keylog", str(keys))
    firsts = {conn["client_random"] for conn in conns}
    partial = tmp_path / "first-handshakes-only.keys"
    partial.write_text("".join(line for line in keys.read_text().splitlines(keepends=True)
                               if line.split()[1:2] and line.split()[1] in firsts))
    code, conns, _captures, err = pcap_jsonl(run_cli, pcap, "--keylog", str(partial))
    assert code == 0, err
    assert len(conns) == 2, conns
    for conn in conns:
        assert conn["decrypted"] is True and conn["handshake_complete"] is True, conn
        assert len(conn["problems"]) == 1, conn["problems"]
        assert conn["problems"][0].startswith(
            "renegotiation: the key log has no secrets for its client random "), conn
        assert "records after its ChangeCipherSpec are not decrypted" in conn["problems"][0]
        assert "<<< ServerHello (decrypted)" in conn["messages"], conn["messages"]
