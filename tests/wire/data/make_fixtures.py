"""Regenerate openssl_msgs.json: real handshake messages recorded with `openssl s_client -msg`.

Each scenario starts `openssl s_server` on 127.0.0.1 (never any other address) with a
throw-away PKI made here, runs `openssl s_client -msg` against it, and keeps every
Handshake / Alert / ChangeCipherSpec message the client printed (TLS 1.3 messages appear in
clear). These cover what Python's ssl module cannot produce: TLS 1.2 PSK suites, anonymous
(EC)DH, TLS 1.0/1.1 client authentication, OCSP stapling, KeyUpdate, session resumption
with pre_shared_key, HelloRequest. Run from anywhere: ``python3 make_fixtures.py``.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).with_name("openssl_msgs.json")
PSK = "0123456789abcdef0123456789abcdef"
HEADER = re.compile(r"^(>>>|<<<) ([^,]+), (\w+) \[length ([0-9a-f]+)\](?:, (.*))?$")
LEGACY = "@SECLEVEL=0"


def sh(*args: str, cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)


def make_pki(d: Path) -> None:
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
       "-out", "ca.pem", "-subj", "/CN=tlsprobe fixture CA", "-days", "3650", cwd=d)
    for name in ("server", "client"):
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
           "-out", f"{name}.csr", "-subj", f"/CN={'localhost' if name == 'server' else name}",
           cwd=d)
        sh("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
           "-CAcreateserial", "-out", f"{name}.pem", "-days", "3650", cwd=d)
    sh("openssl", "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "group:ffdhe2048",
       "-out", "dh.pem", cwd=d)
    serial = subprocess.run(["openssl", "x509", "-in", "server.pem", "-noout", "-serial"],
                            cwd=d, check=True, capture_output=True, text=True
                            ).stdout.strip().split("=")[1]
    (d / "index.txt").write_text(f"V\t351231000000Z\t\t{serial}\tunknown\t/CN=localhost\n")
    sh("openssl", "ocsp", "-issuer", "ca.pem", "-cert", "server.pem", "-reqout", "req.der",
       "-no_nonce", cwd=d)
    sh("openssl", "ocsp", "-index", "index.txt", "-rsigner", "ca.pem", "-rkey", "ca.key",
       "-CA", "ca.pem", "-reqin", "req.der", "-respout", "ocsp.der", "-ndays", "3650", cwd=d)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse_msg_output(text: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = HEADER.match(line)
        if not m or m.group(3) not in ("Handshake", "Alert", "ChangeCipherSpec"):
            continue
        hexes = []
        for follow in lines[i + 1:]:
            if not follow.startswith("    "):
                break
            hexes.append(follow.strip().replace(" ", ""))
        data = "".join(hexes)
        assert len(data) // 2 == int(m.group(4), 16), line
        out.append({"from": "client" if m.group(1) == ">>>" else "server",
                    "content": m.group(3), "version": m.group(2), "hex": data})
    return out


def run(d: Path, server: list[str], client: list[str], stdin: list[str] = (),
        connections: int = 1) -> list[dict[str, object]]:
    port = free_port()
    srv = subprocess.Popen(["openssl", "s_server", "-accept", f"127.0.0.1:{port}",
                            "-naccept", str(connections), *server], cwd=d,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    try:
        time.sleep(0.4)
        results = []
        for n in range(connections):
            extra = (["-sess_out", "sess.pem"] if n == 0 else ["-sess_in", "sess.pem"]
                     ) if connections > 1 else []
            cli = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                                    "-msg", *client, *extra], cwd=d, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            assert cli.stdin is not None
            for cmd in [*stdin, "Q"]:
                time.sleep(0.5)
                if cmd.startswith("server:"):
                    assert srv.stdin is not None
                    srv.stdin.write(cmd[7:].encode() + b"\n")
                    srv.stdin.flush()
                else:
                    cli.stdin.write(cmd + "\n")
                    cli.stdin.flush()
            out, _ = cli.communicate(timeout=10)
            cipher = re.search(r"Cipher is (\S+)", out)
            proto = re.search(r"Protocol *: (\S+)", out) or re.search(r"New, (\S+),", out)
            results.append({"cipher": cipher.group(1) if cipher else "",
                            "protocol": proto.group(1) if proto else "",
                            "messages": parse_msg_output(out)})
        return results
    finally:
        srv.kill()
        srv.wait()


def scenarios() -> dict[str, dict[str, object]]:
    cert = ["-cert", "server.pem", "-key", "server.key", "-CAfile", "ca.pem"]
    client_cert = ["-cert", "client.pem", "-key", "client.key"]
    auth = ["-Verify", "1"]
    psk_s, psk_c = ["-psk", PSK, "-psk_hint", "fixture hint"], ["-psk", PSK, "-psk_identity",
                                                               "client1"]
    return {
        "tls13_keyupdate": {"server": cert, "client": ["-tls1_3"], "stdin": ["K"]},
        "tls13_client_auth": {"server": cert + auth, "client": ["-tls1_3"] + client_cert},
        "tls13_ocsp": {"server": cert + ["-status_file", "ocsp.der"],
                       "client": ["-tls1_3", "-status"]},
        "tls13_resumption": {"server": cert, "client": ["-tls1_3"], "connections": 2},
        "tls12_client_auth": {"server": cert + auth, "client": ["-tls1_2"] + client_cert},
        "tls12_ocsp": {"server": cert + ["-status_file", "ocsp.der"],
                       "client": ["-tls1_2", "-status"]},
        "tls12_renegotiation": {"server": cert, "client": ["-tls1_2"],
                                "stdin": ["server:r", "x"]},
        "tls10_dhe_client_auth": {
            "server": cert + auth + ["-dhparam", "dh.pem", "-tls1", "-cipher",
                                     "DHE-RSA-AES128-SHA:" + LEGACY],
            "client": ["-tls1", "-cipher", "DHE-RSA-AES128-SHA:" + LEGACY] + client_cert},
        "tls11_ecdhe": {"server": cert + ["-tls1_1", "-cipher", "ECDHE-RSA-AES128-SHA:" + LEGACY],
                        "client": ["-tls1_1", "-cipher", "ECDHE-RSA-AES128-SHA:" + LEGACY]},
        "tls12_psk": {"server": ["-nocert"] + psk_s + ["-cipher", "PSK-AES128-CBC-SHA"],
                      "client": ["-tls1_2", "-cipher", "PSK-AES128-CBC-SHA"] + psk_c},
        "tls12_ecdhe_psk": {"server": ["-nocert"] + psk_s + ["-cipher", "ECDHE-PSK-AES128-CBC-SHA"],
                            "client": ["-tls1_2", "-cipher", "ECDHE-PSK-AES128-CBC-SHA"] + psk_c},
        "tls12_dhe_psk": {"server": ["-nocert", "-dhparam", "dh.pem"] + psk_s
                          + ["-cipher", "DHE-PSK-AES128-GCM-SHA256"],
                          "client": ["-tls1_2", "-cipher", "DHE-PSK-AES128-GCM-SHA256"] + psk_c},
        "tls12_rsa_psk": {"server": cert + psk_s + ["-cipher", "RSA-PSK-AES128-GCM-SHA256"],
                          "client": ["-tls1_2", "-cipher", "RSA-PSK-AES128-GCM-SHA256"] + psk_c},
        "tls12_adh": {"server": cert + ["-dhparam", "dh.pem", "-cipher", "ADH-AES128-SHA:" + LEGACY],
                      "client": ["-tls1_2", "-cipher", "ADH-AES128-SHA:" + LEGACY]},
        "tls12_aecdh": {"server": cert + ["-cipher", "AECDH-AES128-SHA:" + LEGACY],
                        "client": ["-tls1_2", "-cipher", "AECDH-AES128-SHA:" + LEGACY]},
        "tls12_maxfrag": {"server": cert, "client": ["-tls1_2", "-maxfraglen", "1024",
                                                     "-servername", "fixture.test",
                                                     "-alpn", "h2,http/1.1"]},
    }


def main() -> None:
    version = subprocess.run(["openssl", "version"], capture_output=True, text=True,
                             check=True).stdout
    result: dict[str, object] = {"_generator": f"make_fixtures.py with {version.strip()}"}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        make_pki(d)
        for name, sc in scenarios().items():
            runs = run(d, list(sc["server"]), list(sc["client"]),  # type: ignore[arg-type]
                       list(sc.get("stdin", [])), int(sc.get("connections", 1)))  # type: ignore[arg-type]
            result[name] = runs if len(runs) > 1 else runs[0]
            print(name, [(r["protocol"], r["cipher"], len(r["messages"])) for r in runs])
    OUT.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
