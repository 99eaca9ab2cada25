"""Keys that change after the first handshake, read back from a capture with the client's
key log, against tshark's reading of the same files. A TLS 1.2 renegotiation (its
ClientHello and ServerHello read under the first handshake's keys) has keys of its own,
logged under its own client random, which each side takes at its next ChangeCipherSpec:
openssl s_client's `R` command against s_server -client_renegotiation, and gnutls-cli
--rehandshake against gnutls-serv (a full one, with a client certificate request). TLS 1.3
post-handshake authentication (s_server's `c` command, s_client -enable_pha) sends the
client's Certificate, CertificateVerify and Finished under the application keys, and that
Finished changes no keys."""

from __future__ import annotations

import os
import socket
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _feed(proc: subprocess.Popen[str], text: str, pause: float = 1.0) -> None:
    """One line to an openssl s_server/s_client's stdin (read as one command or message)."""
    assert proc.stdin is not None
    proc.stdin.write(text)
    proc.stdin.flush()
    time.sleep(pause)


@pytest.mark.needs_impl("openssl")
def test_post_handshake_authentication_keeps_the_application_keys(
        certs: Any, live_pcap: Any, run_cli: Any, tmp_path: Path) -> None:
    keys, pcap, port = tmp_path / "sslkeylog.txt", tmp_path / "pha.pcapng", _free_port()
    leaf = certs["rsa"]
    run = live_pcap(f"tcp port {port}", "--jsonl", "-w", str(pcap))
    server = subprocess.Popen(
        ["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", str(leaf.cert),
         "-key", str(leaf.key), "-tls1_3", "-verify", "1", "-naccept", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = None
    try:
        time.sleep(1.0)
        client = subprocess.Popen(
            ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_3", "-enable_pha",
             "-cert", str(leaf.cert), "-key", str(leaf.key), "-keylogfile", str(keys)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            text=True)
        time.sleep(1.0)
        _feed(server, "c\n")                        # the server asks for the certificate
        _feed(client, "after authentication\n")     # under the same application keys
        _feed(server, "thanks\n")
        assert client.stdin is not None
        client.stdin.close()
        client.wait(20)
        server.wait(20)
        assert server.stdout is not None
        assert "after authentication" in server.stdout.read()   # the server read it
    finally:
        for proc in (client, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(5)
    time.sleep(1.0)
    run.interrupt()
    code, _lines, err = run.finish()
    assert code == 0, err
    code, conns, _captures, err = pcap_jsonl(run_cli, pcap, "--keylog", str(keys), "--msg")
    assert code == 0, err
    [conn] = conns
    assert conn["decrypted"] is True and conn["handshake_complete"] is True, conn
    assert conn["problems"] == [], conn["problems"]
    messages = conn["messages"]
    # (-verify asks in the handshake too): the second request is the post-handshake one
    assert messages.count("<<< CertificateRequest (decrypted)") == 2, messages
    request = len(messages) - 1 - messages[::-1].index("<<< CertificateRequest (decrypted)")
    assert messages[request:request + 4] == [
        "<<< CertificateRequest (decrypted)", ">>> Certificate (decrypted)",
        ">>> CertificateVerify (decrypted)", ">>> Finished (decrypted)"], messages
    trace = conn["trace"]
    finished = [i for i, line in enumerate(trace)
                if line.startswith(">>> TLS 1.3, Handshake") and line.endswith("Finished (decrypted)")]
    assert len(finished) == 2, trace       # the handshake's and the authentication's
    after = trace[finished[1]:]
    client_data = [line for line in after if line.startswith(">>> TLS 1.3, ApplicationData")]
    assert client_data and all(line.endswith("(decrypted)") for line in client_data), after


@pytest.mark.needs_impl("openssl")
def test_session_id_resumption_takes_the_keys_of_the_first_connection(
        tls_server: Any, live_pcap: Any, run_cli: Any, tmp_path: Path) -> None:
    """TLS 1.2 resumption by session id (no tickets) with a key log that has the first
    connection's master secret only: the resumed connection uses it (the ServerHello echoes
    the offered session id), as tshark's session cache does."""
    keys, pcap, session = tmp_path / "sslkeylog.txt", tmp_path / "resume.pcapng", \
        tmp_path / "session.pem"
    server = tls_server("openssl", proto="tls1_2", extra=("-no_ticket",))
    run = live_pcap(f"tcp port {server.port}", "--jsonl", "-w", str(pcap))
    target = f"127.0.0.1:{server.port}"
    for resume in (("-sess_out", str(session)), ("-sess_in", str(session))):
        done = subprocess.run(["openssl", "s_client", "-connect", target, "-tls1_2",
                               "-no_ticket", "-keylogfile", str(keys), *resume],
                              input=HTTP_GET, capture_output=True, text=True, timeout=20,
                              check=False)
        assert done.returncode == 0, done.stdout[-2000:]
    assert "Reused, TLSv1.2" in done.stdout, done.stdout[-2000:]
    time.sleep(1.0)
    run.interrupt()
    code, _lines, err = run.finish()
    assert code == 0, err
    lines = keys.read_text().splitlines(True)
    randoms = [line.split()[1] for line in lines if line.startswith("CLIENT_RANDOM ")]
    assert len(randoms) == 2
    first = tmp_path / "first-only.keys"
    first.write_text("".join(line for line in lines if randoms[1] not in line))
    code, conns, _captures, err = pcap_jsonl(run_cli, pcap, "--keylog", str(first))
    assert code == 0 and err == "", err
    conns.sort(key=lambda c: c["first_frame"])
    assert [c["resumption"] for c in conns] == [None, "session_id"], conns
    for conn in conns:
        assert conn["decrypted"] is True and conn["handshake_complete"] is True, conn
        assert conn["problems"] == [], conn["problems"]
    tshark = _tshark_messages(pcap, first)
    assert tshark[conns[1]["client_port"]].count("20") == 1, tshark   # its Finished too
