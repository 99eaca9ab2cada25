"""Record the few client profiles the simulation tests use (tests/clients/data/*.json).

Not a test: run by hand (`python -m tests.clients.data.record`) to refresh them. A loopback
listener keeps the first ClientHello each client sends to https://localhost:PORT/ and closes;
the profile is written in the packaged format (probes/clients/profiles.py). The packaged
profiles (tlsprobe/data/clients/) are recorded by tools/record_clients.py; the tests depend
only on the ids below.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tlsprobe.model.clients import ClientProfile, ProfileSource, SourceKind, TrustStore
from tlsprobe.probes.clients.profiles import fingerprints, profile_to_json

HERE = Path(__file__).resolve().parent


def _catch(srv: socket.socket, out: list[tuple[int, bytes]]) -> None:
    conn, _ = srv.accept()
    conn.settimeout(10)
    data = b""
    hello = b""
    record_version = 0
    try:
        while True:
            while len(data) < 5:
                data += conn.recv(65536)
            length = int.from_bytes(data[3:5], "big")
            while len(data) < 5 + length:
                data += conn.recv(65536)
            record_version = record_version or int.from_bytes(data[1:3], "big")
            hello += data[5:5 + length]
            data = data[5 + length:]
            if len(hello) >= 4 and len(hello) >= 4 + int.from_bytes(hello[1:4], "big"):
                break
    finally:
        conn.close()
    out.append((record_version, hello[:4 + int.from_bytes(hello[1:4], "big")]))


def record(command: list[str], timeout: float = 60) -> tuple[int, bytes]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    port = srv.getsockname()[1]
    got: list[tuple[int, bytes]] = []
    t = threading.Thread(target=_catch, args=(srv, got), daemon=True)
    t.start()
    cmd = [c.replace("PORT", str(port)) for c in command]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    t.join(timeout)
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait()
    srv.close()
    if not got:
        raise SystemExit(f"no hello from {cmd}")
    return got[0]


def version_of(cmd: list[str]) -> str:
    """The first dotted number the client's version line names."""
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = done.stdout.strip().splitlines()[0]
    found = re.search(r"\d+(\.\d+)+[a-z]*", line)
    return found.group(0) if found else line


def clients(tmp: str) -> list[tuple[str, str, str, str, list[str], bool, TrustStore]]:
    url = "https://localhost:PORT/"
    return [
        ("chromium", "Chromium", version_of(["chromium", "--version"]), "BoringSSL",
         ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
          f"--user-data-dir={tmp}/chr", "--ignore-certificate-errors", "--dump-dom", url],
         False, TrustStore.chrome),
        ("firefox", "Firefox ESR", version_of(["firefox-esr", "--version"]), "NSS",
         ["firefox-esr", "--headless", "--profile", f"{tmp}/ff", "--screenshot",
          f"{tmp}/ff.png", url], False, TrustStore.mozilla),
        ("openssl-s_client", "openssl s_client", version_of(["openssl", "version"]),
         "OpenSSL", ["openssl", "s_client", "-connect", "localhost:PORT",
                     "-servername", "localhost"], True, TrustStore.system),
        ("curl", "curl", version_of(["curl", "--version"]), "OpenSSL",
         ["curl", "-sk", url], True, TrustStore.system),
        ("python-ssl", "Python ssl", sys.version.split()[0], "OpenSSL",
         [sys.executable, "-c", ("import ssl,urllib.request as u; u.urlopen("
          f"'{url}', context=ssl._create_unverified_context(), timeout=5)")],
         True, TrustStore.system),
        ("openssl-tls13-only", "openssl s_client -tls1_3", version_of(["openssl", "version"]),
         "OpenSSL", ["openssl", "s_client", "-tls1_3", "-connect", "localhost:PORT",
                     "-servername", "localhost"], True, TrustStore.system),
    ]


def main() -> None:
    when = datetime.date.today().isoformat()
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(f"{tmp}/ff")
        for pid, client, version, lib, cmd, stable, store in clients(tmp):
            if shutil.which(cmd[0]) is None and not os.path.exists(cmd[0]):
                print("missing", cmd[0])
                continue
            rv, hello = record(cmd)
            j3, j4 = fingerprints(hello)
            prof = ClientProfile(
                id=f"test-{pid}", client=client, version=version, platform="Debian 12 x86_64",
                library=lib, source=ProfileSource(SourceKind.recorded,
                                                  " ".join(cmd[:2]) + " ...", when),
                hello=hello, record_version=rv, ja3=j3, ja4=j4, ja3_stable=stable,
                trust_store=store, notes="recorded for the simulation tests")
            (HERE / f"test-{pid}.json").write_text(json.dumps(profile_to_json(prof), indent=1)
                                                   + "\n")
            print(pid, len(hello), j4)


if __name__ == "__main__":
    main()
