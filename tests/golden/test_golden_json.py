"""Golden JSON outputs (issue 31, "Done when": JSON outputs unchanged, compared before and
after): `tlsprobe pcap --json` of recorded captures (this repository's and the shared
third-party corpus), `tlsprobe HOST --json` and `tlsprobe scan HOST --json` of loopback lab
servers. What depends on the run (ports, times, certificate dates and serials of the test
CA made each session) is replaced by placeholders (conftest.normalize); only the members of
conftest.ALLOWED_NEW may appear beside the golden ones (a check result's `details`).
Regenerate with the command in tests/golden/README.md."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: the folder beside the command (its name is in the file column of the goldens)
CORPUS_DIR = "shared"

#: (folder, file, key log or None): every kind of handshake the lab records, and the
#: corpus' TLS 1.3 (RFC 8446 example, decrypted), TLS 1.2 and DTLS captures
OWN = ("tls13_hrr", "tls13_ffdhe2048", "tls13_mlkem768", "tls13_encrypted_alert",
       "tls12_dhe", "tls12_rsa", "tls12_resumption", "tls12_alert", "tls12_split_gap",
       "tls12_x25519_midstream", "tls13_ipv6")
SHARED = (("tls13-rfc8446.pcap", "keys/tls13-rfc8446.keys"), ("tls12-aes256gcm.pcap", None),
          ("rsasnakeoil2.pcap", None), ("snakeoil-dtls.pcap", None))


def _pcap_json(run_cli, *args: object) -> object:
    code, out, err = run_cli("pcap", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_pcap_json_of_the_repository_captures(golden, run_cli, tmp_path: Path) -> None:
    shutil.copytree(REPO / "captures", tmp_path / "captures")
    for name in OWN:
        keys = Path("captures") / f"{name}.keys"
        args = ["--keylog", keys] if (tmp_path / keys).is_file() else []
        golden.json(f"pcap_{name}.json", _pcap_json(run_cli, f"captures/{name}.pcap", *args))


def test_pcap_json_of_the_shared_corpus(golden, run_cli, captures_dir: Path,
                                         tmp_path: Path) -> None:
    source = captures_dir / "wireshark" / "test-captures"
    shutil.copytree(source, tmp_path / CORPUS_DIR)
    for name, keys in SHARED:
        args = ["--keylog", f"shared/{keys}"] if keys else []
        golden.json(f"shared_{name.removesuffix('.pcap')}.json",
                    _pcap_json(run_cli, f"shared/{name}", *args))


#: (golden name, server implementation, its options, extra arguments): TLS 1.3 and 1.2 with
#: RSA, an ECDSA TLS 1.2-only server, GnuTLS and nginx
LIVE = [("openssl_rsa", "openssl", {}, []),
        ("openssl_ecdsa_tls12", "openssl", {"cert": "ecdsa", "proto": "tls1_2"},
         ["--no-verify"]),
        ("gnutls", "gnutls", {}, []),
        ("nginx", "nginx", {}, [])]
SCANNED = [("openssl_rsa", "openssl", {}), ("openssl_ecdsa_tls12", "openssl",
                                           {"cert": "ecdsa", "proto": "tls1_2"}),
           ("gnutls", "gnutls", {})]


@pytest.mark.parametrize("name, impl, options, args", LIVE, ids=[c[0] for c in LIVE])
def test_probe_json_of_a_lab_server(golden, run_cli, server_cache, name, impl, options,
                                    args) -> None:
    server = server_cache(impl, **options)
    code, out, err = run_cli(f"127.0.0.1:{server.port}", "--json", *args)
    golden.json(f"probe_{name}.json", {"exit": code, "stderr": err, "stdout": json.loads(out)},
                port=server.port)


@pytest.mark.parametrize("name, impl, options", SCANNED, ids=[c[0] for c in SCANNED])
def test_scan_json_of_a_lab_server(golden, run_cli, server_cache, name, impl,
                                   options) -> None:
    server = server_cache(impl, **options)
    code, out, err = run_cli("scan", f"127.0.0.1:{server.port}", "--json", timeout=120)
    golden.json(f"scan_{name}.json",
                {"exit": code, "stderr": err,
                 "stdout": [json.loads(line) for line in out.splitlines()]},
                port=server.port)
