"""`tlsprobe HOST:PORT` against real servers on loopback: what it offers, what it reports."""

from __future__ import annotations

import json
import re
import socket
import threading

import pytest

from tests.helpers.servers import GROUP_CODES


def probe_json(run_cli, server, *args):
    res = run_cli(f"{server.host}:{server.port}" if ":" not in server.host
                  else f"[{server.host}]:{server.port}", "--json", "--timeout", "5", *args)
    return res, json.loads(res.stdout) if res.stdout.strip() else None


def test_tls12_x25519_trace_and_summary(run_cli, server_cache):
    """The seed case: ECDHE-RSA-AES128-GCM-SHA256 with X25519, named curve at SKE +6."""
    srv = server_cache("openssl", groups=["X25519"], ciphers="ECDHE-RSA-AES128-GCM-SHA256",
                       proto="tls1_2")
    res = run_cli(f"127.0.0.1:{srv.port}", "--tls1_2", "--msg", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    ske = out[out.index("ServerKeyExchange"):]
    assert re.search(r"^<<< TLS 1\.2, Handshake \[length [0-9a-f]{4}\], ServerKeyExchange$",
                     out, re.M)
    assert "named_curve x25519 (0x001d) at +6 (bytes +5..+6)" in ske
    # the hex dump under the message really has 0x1d at +6
    dump = ske.split("\n")[1].split()
    assert dump[0] == "0c" and dump[4] == "03" and dump[5:7] == ["00", "1d"]
    assert ">>> TLS 1.0, RecordHeader [length 0005]" in out
    assert re.search(r"^>>> TLS 1\.2, Handshake \[length [0-9a-f]{4}\], ClientHello$", out, re.M)
    assert "Group              x25519 (0x001d), from TLS 1.2 ServerKeyExchange" in out
    assert "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 (0xc02f)" in out
    assert "ECDHE-RSA-AES128-GCM-SHA256" in out
    assert "Server Temp Key    X25519, 253 bits" in out


@pytest.mark.parametrize("group, code, share", [
    ("X25519", 0x001D, 32), ("P-256", 0x0017, 65), ("P-384", 0x0018, 97),
    ("P-521", 0x0019, 133), ("X448", 0x001E, 56), ("ffdhe2048", 0x0100, 256)])
def test_tls13_each_group(run_cli, server_cache, group, code, share):
    srv = server_cache("openssl", groups=[group], proto="tls1_3")
    res, data = probe_json(run_cli, srv, "--groups", f"0x{code:04x}")
    assert res.returncode == 0, res.stderr
    assert data["version"]["name"] == "TLS 1.3"
    kx = data["key_exchange"]
    assert kx["group"]["id"] == code and kx["group"]["hex"] == f"0x{code:04x}"
    assert kx["source"] == "key_share"
    assert kx["server_share_bytes"] == share == kx["client_share_bytes"]
    assert kx["valid"] is True
    assert data["hello_retry_request"] is None


def test_hello_retry_request(run_cli, server_cache):
    """Client shares x25519 only; the server allows only P-256 and asks for it."""
    srv = server_cache("openssl", groups=["P-256"], proto="tls1_3")
    res, data = probe_json(run_cli, srv, "--groups", "x25519:P-256")
    assert res.returncode == 0, res.stderr
    assert data["hello_retry_request"]["name"] == "secp256r1"
    assert data["key_exchange"]["group"]["id"] == 0x17
    assert data["key_exchange"]["source"] == "hello_retry_request"
    assert data["messages"][:3] == [">>> ClientHello", "<<< HelloRetryRequest", ">>> ClientHello"]
    assert [g["name"] for g in data["offer"]["key_share_groups"]] == ["x25519"]
    text = run_cli(f"127.0.0.1:{srv.port}", "--groups", "x25519:P-256", "--msg").stdout
    assert "HelloRetryRequest" in text and "key_share.selected_group secp256r1 (0x0017)" in text


def test_tls12_dhe_recognises_the_prime(run_cli, server_cache):
    srv = server_cache("openssl", proto="tls1_2", ciphers="DHE-RSA-AES128-GCM-SHA256",
                       dhparam="ffdhe3072")
    res, data = probe_json(run_cli, srv, "--tls1_2")
    assert res.returncode == 0, res.stderr
    kx = data["key_exchange"]
    assert kx["kind"] == "DHE" and kx["source"] == "dhe_parameters"
    assert kx["dh_group_name"] == "ffdhe3072" and kx["dh_prime_bits"] == 3072
    assert kx["group"]["id"] == 0x0101
    assert data["cipher"]["openssl_name"] == "DHE-RSA-AES128-GCM-SHA256"


def test_tls12_rsa_key_transport(run_cli, server_cache):
    srv = server_cache("openssl", proto="tls1_2", ciphers="AES128-GCM-SHA256")
    res, data = probe_json(run_cli, srv, "--tls1_2")
    assert res.returncode == 0, res.stderr
    assert data["cipher"]["hex"] == "0x009c"
    assert data["key_exchange"]["kind"] == "RSA" and data["key_exchange"]["group"] is None
    assert data["certificates"][0]["key_type"] == "RSA"
    assert data["certificates"][0]["key_bits"] == 2048


def test_pq_hybrid_only_server(run_cli, server_cache):
    srv = server_cache("pyopenssl", groups=["X25519MLKEM768"], proto="tls1_3")
    res, data = probe_json(run_cli, srv)
    assert res.returncode == 0, res.stderr
    kx = data["key_exchange"]
    assert kx["group"] == {"id": 0x11EC, "hex": "0x11ec", "name": "X25519MLKEM768"}
    assert kx["server_share_bytes"] == 1120 and kx["client_share_bytes"] == 1216
    assert kx["kind"] == "hybrid" and kx["valid"] is True


def test_no_shared_group_is_an_alert(run_cli, server_cache):
    srv = server_cache("openssl", groups=["P-384"], proto="tls1_3")
    res = run_cli(f"127.0.0.1:{srv.port}", "--groups", "x25519", "--timeout", "5")
    assert res.returncode == 5
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in res.stderr
    assert f"127.0.0.1:{srv.port}" in err[0] and "handshake_failure" in err[0]


def test_ipv6_target(run_cli, server_cache):
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    srv = server_cache("openssl", groups=["X25519"], proto="tls1_3", host="::1")
    res, data = probe_json(run_cli, srv)
    assert res.returncode == 0, res.stderr
    assert data["host"] == "::1" and data["key_exchange"]["group"]["name"] == "x25519"


def test_user_chosen_offer_is_sent(run_cli, server_cache):
    """Groups, shares, suites and versions on the command line end up in the ClientHello."""
    srv = server_cache("openssl", groups=["P-384", "X25519"], proto="both")
    res, data = probe_json(run_cli, srv, "--groups", "0x6399,secp384r1,x25519",
                           "--key-shares", "secp384r1", "--ciphersuites",
                           "TLS_AES_256_GCM_SHA384", "--ciphers", "ECDHE-RSA-AES256-GCM-SHA384",
                           "--alpn", "http/1.1", "--sni", "example.test")
    assert res.returncode == 0, res.stderr
    offer = data["offer"]
    assert [g["hex"] for g in offer["groups"]] == ["0x6399", "0x0018", "0x001d"]
    assert [g["name"] for g in offer["key_share_groups"]] == ["secp384r1"]
    assert [c["hex"] for c in offer["cipher_suites"]][:2] == ["0x1302", "0xc030"]
    assert offer["sni"] == "example.test" and offer["alpn"] == ["http/1.1"]
    assert data["cipher"]["hex"] == "0x1302"
    assert data["key_exchange"]["group"]["id"] == GROUP_CODES["P-384"]


def _one_shot_server(reply: bytes) -> tuple[int, threading.Thread]:
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    port = ls.getsockname()[1]

    def serve() -> None:
        c, _ = ls.accept()
        c.sendall(reply)
        try:
            c.recv(4096)
        except OSError:
            pass
        c.close()
        ls.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return port, t


@pytest.mark.parametrize("banner, word", [(b"SSH-2.0-OpenSSH_9.2\r\n", "SSH banner"),
                                          (b"HTTP/1.1 400 Bad Request\r\n\r\n", "HTTP")])
def test_not_tls_service(run_cli, banner, word):
    port, t = _one_shot_server(banner)
    res = run_cli(f"127.0.0.1:{port}", "--timeout", "3")
    t.join(5)
    assert res.returncode == 4
    assert word in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_connection_refused_and_bad_arguments(run_cli):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    res = run_cli(f"127.0.0.1:{port}", "--timeout", "2")
    assert res.returncode == 3 and "connection refused" in res.stderr
    res = run_cli("127.0.0.1:99999")
    assert res.returncode == 2 and "bad port" in res.stderr
    res = run_cli("127.0.0.1:443", "--groups", "nosuchgroup")
    assert res.returncode == 2 and "nosuchgroup" in res.stderr
    assert "Traceback" not in res.stderr


def test_timeout_when_server_never_answers(run_cli):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    try:
        res = run_cli(f"127.0.0.1:{ls.getsockname()[1]}", "--timeout", "1", timeout=20)
    finally:
        ls.close()
    assert res.returncode == 3 and "timed out" in res.stderr


def test_demo_serves_and_probes(run_cli):
    res = run_cli("demo", timeout=60)
    assert res.returncode == 0, res.stderr
    assert "named_curve x25519 (0x001d) at +6" in res.stdout
    assert "Group              x25519 (0x001d), from TLS 1.2 ServerKeyExchange" in res.stdout
    res = run_cli("demo", "--openssl", "no-such-openssl")
    assert res.returncode == 2 and "no such file" in res.stderr


@pytest.mark.parametrize("groups", [["X25519"], ["P-256"]])
def test_grease_offer_completes(run_cli, server_cache, groups):
    """--grease adds RFC 8701 values to suites, groups, key shares, versions and extensions;
    the server ignores them (and a HelloRetryRequest round keeps working)."""
    srv = server_cache("openssl", groups=groups, proto="tls1_3")
    res, data = probe_json(run_cli, srv, "--grease", "--groups", "x25519:P-256")
    assert res.returncode == 0, res.stderr
    offer = data["offer"]

    def greasy(value: int) -> bool:
        return value & 0x0F0F == 0x0A0A and value >> 8 == value & 0xFF

    for field in ("cipher_suites", "groups", "key_share_groups", "versions"):
        first = offer[field][0]
        assert greasy(first["id"]), field
        assert first.get("name", first.get("iana_name")) == "GREASE", field
        assert not any(greasy(v["id"]) for v in offer[field][1:]), field
    assert data["handshake_complete"] is True
    assert data["key_exchange"]["group"]["name"] == {"X25519": "x25519",
                                                     "P-256": "secp256r1"}[groups[0]]
    plain, plain_data = probe_json(run_cli, srv, "--groups", "x25519:P-256")
    assert plain.returncode == 0
    assert not any(greasy(c["id"]) for c in plain_data["offer"]["cipher_suites"])


def test_timing_flag_ranks_groups(run_cli, server_cache):
    """`tlsprobe HOST:PORT --timing` times each group the server accepts and ranks them."""
    srv = server_cache("openssl", groups=["X25519", "ffdhe6144"], proto="tls1_3")
    res = run_cli(f"127.0.0.1:{srv.port}", "--timing", "--timing-runs", "4",
                  "--timing-versions", "1.3", "--json", timeout=120)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    ranking = next(r for r in data["rankings"] if r["version"]["name"] == "TLS 1.3")
    assert set(ranking["order"]) == {"x25519 (0x001d)", "ffdhe6144 (0x0103)"}
    assert ranking["order"][0] == "x25519 (0x001d)" and ranking["ratio"] > 1.5
    # 4 runs give no confidence interval: the lowest median is not called the cheapest
    assert ranking["cheapest"] is None and ranking["distinct"] is False
    assert ranking["verdict"].startswith("TLS 1.3: lowest median: x25519 (0x001d), ")
    assert ranking["verdict"].endswith("too few runs for a confidence interval)")
    res = run_cli(f"127.0.0.1:{srv.port}", "--timing", "--timing-runs", "0")
    assert res.returncode == 2 and "Traceback" not in res.stderr
