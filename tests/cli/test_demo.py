"""`tlsprobe demo`: the local s_server follows --groups and --tls1_3, and says in one line
when the openssl binary cannot serve a group.

Each CLI test starts a real openssl s_server on 127.0.0.1 through `tlsprobe demo`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest

from tlsprobe.commands import demo
from tlsprobe.errors import UsageError

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="no openssl binary on PATH")


def _openssl_version() -> tuple[int, int]:
    assert OPENSSL is not None
    line = subprocess.run([OPENSSL, "version"], capture_output=True, text=True,
                          check=True).stdout
    match = re.match(r"OpenSSL (\d+)\.(\d+)", line)
    assert match, line
    return int(match.group(1)), int(match.group(2))


def _field(out: str, name: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith(name + " ")]
    return line[len(name):].strip()


def _one_line(result: Any, code: int = 2) -> str:
    assert result.returncode == code and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    return result.stderr


@needs_openssl
@pytest.mark.parametrize("groups, suite, group", [
    ("ffdhe2048", "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256 (0x009e)", "ffdhe2048 (0x0100)"),
    # the first FFDHE group is the server's prime, not s_server's default 2048-bit one
    ("ffdhe3072:X25519", "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256 (0x009e)", "ffdhe3072 (0x0101)"),
    ("X25519:ffdhe3072", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 (0xc02f)", "x25519 (0x001d)"),
])
def test_tls12_demo_serves_the_requested_group(run_cli: Any, groups: str, suite: str,
                                               group: str) -> None:
    res = run_cli("demo", "--groups", groups, "--no-msg", timeout=60)
    assert res.returncode == 0, res.stderr
    assert _field(res.stdout, "Protocol") == "TLS 1.2 (0x0303)"
    assert _field(res.stdout, "Cipher") == suite
    assert _field(res.stdout, "Group").startswith(f"{group}, from TLS 1.2 ServerKeyExchange")
    (probe,) = [line for line in res.stdout.splitlines() if line.startswith("# tlsprobe ")]
    assert f"--groups {groups}" in probe  # the probe offers what the server was given


@needs_openssl
def test_tls13_demo_offers_the_group_it_serves(run_cli: Any) -> None:
    res = run_cli("demo", "--tls1_3", "--groups", "ffdhe2048", "--no-msg", timeout=60)
    assert res.returncode == 0, res.stderr
    assert _field(res.stdout, "Protocol") == "TLS 1.3 (0x0304)"
    assert _field(res.stdout, "Group") == "ffdhe2048 (0x0100), from TLS 1.3 key_share"


@needs_openssl
@pytest.mark.parametrize("tls13", [False, True])
def test_a_post_quantum_group_the_openssl_cannot_serve_is_one_line(run_cli: Any,
                                                                   tls13: bool) -> None:
    args = ["demo", "--groups", "X25519MLKEM768", "--no-msg"] + (["--tls1_3"] if tls13 else [])
    res = run_cli(*args, timeout=60)
    major, minor = _openssl_version()
    if (major, minor) < (3, 5):
        err = _one_line(res)
        assert err.startswith("tlsprobe: ") and err.endswith(
            f" the system openssl {major}.{minor} cannot serve X25519MLKEM768; try a server "
            "on OpenSSL 3.5+\n")
        assert res.stdout == ""
    elif tls13:
        assert res.returncode == 0, res.stderr
        assert _field(res.stdout, "Group").startswith("X25519MLKEM768 (0x11ec)")
    else:
        assert "X25519MLKEM768: TLS 1.3 only; add --tls1_3" in _one_line(res)


@needs_openssl
def test_bad_group_names_are_usage_errors(run_cli: Any) -> None:
    assert "--groups: unknown group 'bogus'" in _one_line(run_cli("demo", "--groups", "bogus"))
    assert "secp256k1: no TLS 1.3 group" in _one_line(
        run_cli("demo", "--tls1_3", "--groups", "secp256k1", timeout=60))


def test_plan_follows_groups_and_version() -> None:
    default = demo.plan(None, tls13=False)
    assert default.server == ["-groups", "X25519", "-tls1_2", "-cipher",
                              "ECDHE-RSA-AES128-GCM-SHA256"]
    assert default.probe == ["--tls1_2"]  # no --groups: the probe's own default offer
    assert default.dhe_prime is None and default.problem is None
    mixed = demo.plan("ffdhe4096:P-256:X25519MLKEM768", tls13=False)
    assert mixed.server[-2:] == ["-cipher",
                                 "DHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"]
    assert mixed.dhe_prime == 0x0102 and mixed.problem is None
    assert mixed.probe == ["--tls1_2", "--groups", "ffdhe4096:P-256:X25519MLKEM768",
                           "--ciphers", "DHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"]
    only13 = demo.plan("X25519MLKEM768", tls13=False)
    assert only13.problem == "X25519MLKEM768: TLS 1.3 only; add --tls1_3"
    tls13 = demo.plan("X25519MLKEM768,x25519", tls13=True)
    assert tls13.server == ["-groups", "X25519MLKEM768:x25519", "-tls1_3"]
    assert tls13.probe == ["--tls1_3", "--groups", "X25519MLKEM768:x25519"]
    with pytest.raises(UsageError, match="no group given"):
        demo.plan(" : ", tls13=True)


@needs_openssl
def test_start_failure_reads_what_s_server_printed(tmp_path: Any) -> None:
    assert OPENSSL is not None
    cert, key = demo._self_signed(tmp_path)
    done = subprocess.run([OPENSSL, "s_server", "-accept", "127.0.0.1:0", "-cert", str(cert),
                           "-key", str(key), "-groups", "NoSuchGroupAtAll", "-www"],
                          capture_output=True, text=True, timeout=20, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode != 0
    plan = demo.plan("x25519", tls13=True)
    plan.groups.append(("NoSuchGroupAtAll", 0xFEFE))
    message = demo.start_failure(done.stderr + done.stdout, plan, OPENSSL, explicit=False)
    major, minor = _openssl_version()
    assert message.startswith(f"the system openssl {major}.{minor} cannot serve ")
    assert "NoSuchGroupAtAll" in message and "3.5" not in message  # no ML-KEM hint


def test_an_openssl_that_is_not_openssl_is_refused_before_any_server(run_cli: Any,
                                                                     tmp_path: Any) -> None:
    # the same check as `tlsprobe speed --openssl`: one line, exit 2, nothing on stdout
    true = shutil.which("true")
    assert true is not None
    res = run_cli("demo", "--openssl", true, "--no-msg", timeout=30)
    assert _one_line(res) == (f"tlsprobe: error: --openssl {true}: not openssl "
                              "(`true version` printed nothing)\n")
    assert res.stdout == ""
    missing = tmp_path / "no-such-openssl"
    assert _one_line(run_cli("demo", "--openssl", missing)) == (
        f"tlsprobe: error: --openssl {missing}: no such file\n")
    assert "no such file on PATH" in _one_line(run_cli("demo", "--openssl",
                                                       "no-such-openssl-anywhere"))


def test_the_wait_is_for_the_demo_servers_own_listener() -> None:
    """Another program listening on the same port at another address (127.0.0.2 here,
    [::1] alike) is not the demo server, which accepts on 127.0.0.1: the wait goes on
    (it took such a listener for its server, and the probe then met "connection refused")."""
    import socket
    import subprocess
    import sys

    from tlsprobe.commands.demo import _wait_listening
    # the port is held at 127.0.0.1 from the start, bound but not listening (no listener
    # there until listen()): another test's server cannot take it meanwhile, as it could
    # when the test chose it at 127.0.0.2 only and bound 127.0.0.1 later
    for _ in range(20):
        own, other = socket.socket(), socket.socket()
        own.bind(("127.0.0.1", 0))
        port = own.getsockname()[1]
        try:
            other.bind(("127.0.0.2", port))
            break
        except OSError:   # that port is taken at 127.0.0.2: another one
            own.close()
            other.close()
    with own, other:
        other.listen()
        quiet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert not _wait_listening(port, quiet, timeout=0.5)
            own.listen()
            assert _wait_listening(port, quiet, timeout=5.0)
        finally:
            quiet.kill()
            quiet.wait()
