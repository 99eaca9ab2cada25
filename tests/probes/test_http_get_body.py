"""`--http-get` against a server whose answer has a long body: the probe reports the status
line and stops reading, however long the body (it read on to the end, counting the body
against --max-bytes: a 4 MB page with --max-bytes 1000000, or any page over the default
16 MiB, ended with exit 8, 'server sent more than N bytes', after the status was read)."""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest

from tests.conftest import CliResult
from tests.helpers.tls_answer import tls_answering
from tests.lab_servers.certs import CertSet

BODY = 4_000_000


@pytest.fixture
def big_page(certs: CertSet) -> Iterator[int]:
    """A Python ssl (OpenSSL) server on loopback answering any request with a 4 MB body."""
    page = f"HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n".encode() + b"x" * BODY
    with tls_answering(certs["rsa"].chain, certs["rsa"].key, page) as port:
        yield port


def test_http_get_reports_the_status_of_a_page_longer_than_max_bytes(
        big_page: int, run_cli: Callable[..., CliResult]) -> None:
    for tls in ("--tls1_3", "--tls1_2"):
        start = time.monotonic()
        code, out, err = run_cli("probe", f"127.0.0.1:{big_page}", tls, "--http-get", "/",
                                 "--no-verify", "--json", "--max-bytes", "1000000")
        assert code == 0, err
        data = json.loads(out)
        assert data["http_status"] == "HTTP/1.1 200 OK"
        assert data["error"] is None and data["handshake_complete"] is True
        assert time.monotonic() - start < 20
