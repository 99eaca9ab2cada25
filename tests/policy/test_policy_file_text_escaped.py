"""Text from a policy or baseline file in an error line is shown in the one escaping style
of network and file text (tlsprobe/escaping.py `quoted_text`: single quotes, a quote as \\',
controls and U+202E as \\xNN / \\uNNNN), as every other message shows it. Before, these
lines used Python's repr: another quoting for a text with a quote ("it's"), and a list or
table value written out with its contents ("not ['\\x1b[31m']"). Files with control
characters, ESC [31m, U+202E and invalid UTF-8 (raw bytes, and a lone surrogate escape) in
a key and in a value."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

HOSTILE = "it's\\u001b[31m\\u202e\\u0007\\udcff"   # as JSON writes it
SHOWN = "'it\\'s\\x1b[31m\\u202e\\x07\\udcff'"     # quoted_text of it

CASES = {
    "key": ('{"versions": ["TLS 1.2"], "%s": 1}' % HOSTILE,
            f"unknown key {SHOWN} (known: "),
    "version-value": ('{"versions": ["%s"]}' % HOSTILE,
                      f"unknown version {SHOWN} in 'versions' (use e.g. 'TLS 1.2'"),
    "severity-key": ('{"severity": {"%s": "high"}}' % HOSTILE,
                     f"[severity] unknown finding code {SHOWN} (see docs/POLICY.md"),
    "severity-value": ('{"severity": {"certificate.untrusted": "%s"}}' % HOSTILE,
                       f"[severity] 'certificate.untrusted': {SHOWN} is no severity"),
    "suite-value": ('{"cipher_suites": ["%s"]}' % HOSTILE,
                    f"'cipher_suites': unknown cipher suite {SHOWN} (use an IANA name"),
    "list-value": ('{"title": ["\\u001b[31m"]}', "'title' must be a string, not a list"),
}


def _assert_one_clean_line(stderr: str, expected: str) -> None:
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    assert expected in stderr, (expected, stderr)
    assert not any(c in stderr for c in "\x1b\u202e\x07\x00"), stderr


@pytest.mark.parametrize("name", list(CASES))
def test_policy_file_text_in_the_one_style(run_cli: Callable[..., Any], tmp_path: Path,
                                           name: str) -> None:
    text, expected = CASES[name]
    path = tmp_path / "policy.json"
    path.write_text(text, encoding="ascii")
    res = run_cli("scan", "127.0.0.1:1", "--policy", path, "--no-progress")
    assert res.returncode == 2, (res.returncode, res.stderr)
    _assert_one_clean_line(res.stderr, f"policy {path}: {expected}")


@pytest.mark.parametrize("where", ["key", "value"])
def test_policy_file_of_invalid_utf8(run_cli: Callable[..., Any], tmp_path: Path,
                                     where: str) -> None:
    raw = b'{"\xff\x1b[31m": 1}' if where == "key" else b'{"title": "\xff\xe2\x80\xae"}'
    path = tmp_path / "policy.json"
    path.write_bytes(raw)
    res = run_cli("scan", "127.0.0.1:1", "--policy", path, "--no-progress")
    assert res.returncode == 2, (res.returncode, res.stderr)
    at = raw.index(0xFF)
    _assert_one_clean_line(res.stderr, f"policy file {path}: not UTF-8 text (byte 0xff at "
                           f"offset {at})")


def test_baseline_file_text_in_the_one_style(run_cli: Callable[..., Any],
                                             tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text('{"tool": "%s", "kind": ["\\u001b[31m"], "host": "h", "port": 1}\n'
                    % HOSTILE, encoding="ascii")
    res = run_cli("scan", "127.0.0.1:1", "--baseline", path, "--no-progress")
    assert res.returncode == 2, (res.returncode, res.stderr)
    _assert_one_clean_line(res.stderr, f"--baseline {path}: not a tlsprobe scan document "
                           f"(tool {SHOWN}, kind a list; expected the output of tlsprobe "
                           "scan --json)")
