"""--keylog when the probe derived no secret (TLS 1.2 --first-flight-only stops before the
ClientKeyExchange, so there is no master secret): the file is not written and a note on
stderr says so (it was silent: exit 0, no file, nothing said); TLS 1.3 --first-flight-only
still writes its handshake secrets."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.helpers.servers import Server


def test_keylog_with_nothing_to_write_says_so(server_cache: Callable[..., Server],
                                              run_cli: Callable[..., CliResult],
                                              tmp_path: Path) -> None:
    srv = server_cache("openssl", groups=["X25519"], proto="both")
    keylog = tmp_path / "keys.log"
    code, _, err = run_cli(f"127.0.0.1:{srv.port}", "--tls1_2", "--first-flight-only",
                           "--no-verify", "--keylog", keylog)
    assert code == 0, err
    assert not keylog.exists()
    assert err == (f"tlsprobe: note: --keylog {keylog}: nothing written: the handshake "
                   "stopped before any secret was derived (TLS 1.2 and older with "
                   "--first-flight-only stop before the ClientKeyExchange)\n"), err
    code, _, err = run_cli(f"127.0.0.1:{srv.port}", "--tls1_3", "--first-flight-only",
                           "--no-verify", "--keylog", keylog)
    assert (code, err) == (0, "")
    assert "SERVER_HANDSHAKE_TRAFFIC_SECRET " in keylog.read_text()
