"""`tlsprobe speed`: the harness, the primitives, the CLI (as a subprocess), openssl speed.

The whole file runs in well under 30 s: figures are measured for tiny --seconds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from itertools import count
from typing import Any

import cryptography
import pytest
from cryptography.hazmat.backends.openssl import backend
from cryptography.hazmat.primitives.asymmetric import mlkem, x25519

from tlsprobe.speed import (
    Op,
    SpeedReport,
    UnknownAlgorithm,
    catalog,
    measure,
    openssl,
    text,
)
from tlsprobe.speed.kex import HYBRIDS, Hybrid
from tlsprobe.model.speed import AlgorithmResult, Comparison, ComparisonRow, Figure
from tlsprobe.speed.text import AEAD_CALL_NOTE, comparison_lines

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="no openssl binary on PATH")

BLOCK_SIZES = [16, 64, 256, 1024, 8192, 16384]
KEX = ["x25519", "x448", "p256", "p384", "p521", "secp256k1", "brainpoolp256r1",
       "brainpoolp384r1", "brainpoolp512r1", "ffdhe2048", "ffdhe3072", "ffdhe4096",
       "ffdhe6144", "ffdhe8192"]
KEM = ["mlkem768", "mlkem1024", "x25519mlkem768", "secp256r1mlkem768", "secp384r1mlkem1024"]
SIG = ["rsa2048", "rsa2048-pss", "rsa3072", "rsa3072-pss", "rsa4096", "rsa4096-pss",
       "ecdsap256", "ecdsap384", "ecdsap521", "ed25519", "ed448", "mldsa44", "mldsa65",
       "mldsa87"]
AEAD = ["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305", "aes-128-ccm"]
EXPECTED_OPS = {"kex": ["keygen", "derive"], "kem": ["keygen", "encaps", "decaps"],
                "sig": ["sign", "verify"]}


# --- harness -------------------------------------------------------------------------------

@pytest.mark.parametrize("arity", range(5))
def test_measure_calls_the_function_with_its_arguments_for_the_requested_time(
        arity: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call gets the arguments, and the run ends within a batch of the time asked.
    The clock is the harness's own, advanced 20 us by each call: a run judged by the real
    clock (or by this thread's CPU time, which a virtual machine's stolen time inflates
    too: 0.67 s for 26,669 empty calls in a loaded CI run) says more of the machine than
    of the harness."""
    from tlsprobe.speed import harness
    now = [0.0]
    monkeypatch.setattr(harness, "perf_counter", lambda: now[0])
    seen: list[tuple[object, ...]] = []
    args = tuple(object() for _ in range(arity))

    def op(*received: object) -> None:
        seen.append(received)
        now[0] += 20e-6

    timing = measure(Op("x", op, args), 0.03)
    assert timing.count + 1 == len(seen)          # every timed call plus the warm-up
    assert all(call == args for call in seen)
    # the last batch was planned for what was left: no more than one call over
    assert 0.03 <= timing.seconds < 0.03 + 20e-6 + 1e-9, timing
    assert timing.count == round(timing.seconds / 20e-6)
    assert timing.per_second == pytest.approx(timing.count / timing.seconds)
    monkeypatch.undo()      # and with the real clock: at least the time asked
    seen.clear()
    real = measure(Op("x", op, args), 0.03)
    assert real.seconds >= 0.03 and real.count + 1 == len(seen)


def test_measure_runs_a_slow_operation_at_least_once() -> None:
    calls = count()

    def slow() -> None:
        next(calls)
        subprocess.run(["true"], check=True)  # a few ms, far more than the 1 ms asked

    timing = measure(Op("slow", slow), 0.001)
    assert timing.count >= 1 and timing.seconds > 0.001


def test_measure_refuses_too_many_arguments() -> None:
    with pytest.raises(ValueError, match="at most 4"):
        measure(Op("x", print, (1, 2, 3, 4, 5)), 0.01)


# --- names ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("x25519", "x25519"), ("ecdhx25519", "x25519"), ("ecdhp256", "p256"), ("P-256", "p256"),
    ("secp256r1", "p256"), ("ECDSAP256", "ecdsap256"), ("rsa2048", "rsa2048"),
    ("rsa2048-pss", "rsa2048-pss"), ("ML-KEM-768", "mlkem768"), ("X25519MLKEM768",
    "x25519mlkem768"), ("SecP256r1MLKEM768", "secp256r1mlkem768"), ("ffdh2048", "ffdhe2048"),
    ("ML_DSA_65", "mldsa65"), ("aes-128-gcm", "aes-128-gcm"), ("AES128GCM", "aes-128-gcm"),
    ("chacha20-poly1305", "chacha20-poly1305"), ("ecdhbrp256r1", "brainpoolp256r1"),
])
def test_names_like_openssl_and_ours(name: str, expected: str) -> None:
    assert [a.name for a in catalog.lookup(name)] == [expected]


def test_groups_and_default_selection() -> None:
    assert [a.name for a in catalog.resolve(["rsa"])] == SIG[:6]
    assert [a.name for a in catalog.resolve(["hybrid"])] == KEM[2:]
    assert [a.name for a in catalog.resolve(["aead", "x25519"])] == ["x25519"] + AEAD
    assert [a.name for a in catalog.resolve([])] == KEX + KEM + SIG + AEAD
    with pytest.raises(UnknownAlgorithm, match="tlsprobe speed --list"):
        catalog.resolve(["x25519", "rot13"])


# --- primitives ----------------------------------------------------------------------------

@pytest.mark.parametrize("name, level, client_len, server_len, secret_len", [
    ("X25519MLKEM768", 768, 1184 + 32, 1088 + 32, 64),
    ("SecP256r1MLKEM768", 768, 65 + 1184, 65 + 1088, 64),
    ("SecP384r1MLKEM1024", 1024, 97 + 1568, 97 + 1568, 80),
])
def test_hybrids_run_the_tls_exchange(name: str, level: int, client_len: int, server_len: int,
                                      secret_len: int) -> None:
    hybrid = HYBRIDS[name]
    assert hybrid.level == level
    assert [a.name for a in catalog.lookup(name)] == [name.lower()]
    kem_key, ec_key, client_share = hybrid.client_keygen()
    server_share, server_secret = hybrid.server_encaps(client_share)
    assert (len(client_share), len(server_share), len(server_secret)) == \
        (client_len, server_len, secret_len)
    assert hybrid.client_decaps(kem_key, ec_key, server_share) == server_secret  # type: ignore[arg-type]


def test_x25519mlkem768_puts_mlkem_first_as_the_draft_says() -> None:
    hybrid = Hybrid(768, None)
    kem_key, ec_key, client_share = hybrid.client_keygen()
    assert client_share[:1184] == kem_key.public_key().public_bytes_raw()  # type: ignore[attr-defined]
    server_share, secret = hybrid.server_encaps(client_share)
    assert isinstance(ec_key, x25519.X25519PrivateKey)
    peer = x25519.X25519PublicKey.from_public_bytes(server_share[1088:])
    assert secret[32:] == ec_key.exchange(peer)
    assert isinstance(kem_key, mlkem.MLKEM768PrivateKey)
    assert secret[:32] == kem_key.decapsulate(server_share[:1088])


# --- CLI -----------------------------------------------------------------------------------

def _figures(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["algorithm"]: r for r in doc["results"]}


def test_fast_run_of_everything_gives_a_positive_figure_for_every_primitive(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "--seconds", "0.01", "--json", timeout=120)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "tlsprobe.speed/1"
    assert doc["library"] == {"cryptography": cryptography.__version__,
                              "openssl": backend.openssl_version_text()}
    assert doc["seconds"] == 0.01 and doc["processes"] == 1
    assert doc["block_sizes"] == BLOCK_SIZES and doc["openssl_comparison"] is None
    results = _figures(doc)
    assert list(results) == KEX + KEM + SIG + AEAD
    for name, result in results.items():
        kind = result["kind"]
        assert result["description"]
        figures = result["figures"]
        if kind == "aead":
            assert [f["block_size"] for f in figures] == BLOCK_SIZES
            assert {f["operation"] for f in figures} == {"encrypt"}
        else:
            assert [f["operation"] for f in figures] == EXPECTED_OPS[kind], name
        for fig in figures:
            assert set(fig) == {"operation", "block_size", "count", "seconds", "per_second",
                                "bytes_per_second", "per_process"}
            assert fig["count"] >= 1 and fig["seconds"] > 0, (name, fig)
            assert fig["per_process"] is None  # one process
            assert fig["per_second"] == pytest.approx(fig["count"] / fig["seconds"])
            if kind == "aead":
                assert fig["bytes_per_second"] == pytest.approx(fig["per_second"]
                                                                * fig["block_size"])
            else:
                assert fig["block_size"] is None and fig["bytes_per_second"] is None


def test_plain_output_has_openssl_layout(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "--seconds", "0.02", "--bytes", "16,1024", "ecdhx25519",
                             "ed25519", "aes-128-gcm")
    assert code == 0 and err == ""  # no progress display when stderr is not a terminal
    assert out.startswith("tlsprobe ") and "OpenSSL" in out.splitlines()[0]
    kex = out.split("\nKey exchange:\n", 1)[1].splitlines()
    assert kex[0].split() == ["keygen", "derive", "keygen/s", "derive/s", "bar:derive/s"]
    label, rest = re.split(r"\s{2,}", kex[1].strip(), maxsplit=1)
    cells = rest.split()
    assert label == "253 bits ecdh (X25519)"
    for seconds_per_op, rate in zip(cells[:2], cells[2:]):  # time column is 1 / rate
        assert float(seconds_per_op.rstrip("s")) == pytest.approx(1 / float(rate), rel=0.1,
                                                                   abs=2e-6)
    sig = out.split("\nSignatures:\n", 1)[1].splitlines()
    assert sig[0].split() == ["sign", "verify", "sign/s", "verify/s", "bar:verify/s"]
    assert sig[1].startswith("253 bits EdDSA (Ed25519)")
    aead = out.split("\nAEAD encryption:\n", 1)[1].splitlines()
    assert aead[0] == "The 'numbers' are in 1000s of bytes per second processed."
    assert aead[1].split() == ["type", "16", "bytes", "1024", "bytes", "bar:1024"]
    name, small, large, drawn = aead[2].split()
    assert drawn == "█" * 20    # the only AEAD: the fastest fills the bar
    assert name == "AES-128-GCM" and small.endswith("k") and large.endswith("k")
    assert float(small[:-1]) > 0 and float(large[:-1]) > 0


def test_multi_sums_over_processes(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "--multi", "2", "--seconds", "0.05", "--json", "x25519")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["processes"] == 2
    (result,) = doc["results"]
    assert [f["operation"] for f in result["figures"]] == ["keygen", "derive"]
    for fig in result["figures"]:
        workers = fig["per_process"]
        assert len(workers) == 2 and all(rate > 0 for rate in workers)
        assert fig["per_second"] == pytest.approx(sum(workers))  # summed like openssl -multi
        assert fig["count"] >= 2


@pytest.mark.parametrize("args, message", [
    (["speed", "rot13"], "unknown algorithm 'rot13' (see 'tlsprobe speed --list')"),
    (["speed", "--seconds", "fast", "x25519"], "--seconds: not a number: 'fast'"),
    (["speed", "--seconds", "0", "x25519"], "--seconds must be at least 0.01"),
    (["speed", "--multi", "0", "x25519"], "--multi must be between 1 and 256, not 0"),
    (["speed", "--bytes", "16,x", "aead"], "--bytes: not a whole number: 'x'"),
])
def test_bad_arguments_give_one_line_and_exit_2(run_cli: Any, args: list[str],
                                                 message: str) -> None:
    code, out, err = run_cli(*args)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("tlsprobe: ") and message in err


def test_list_names_every_algorithm(run_cli: Any) -> None:
    code, out, _ = run_cli("speed", "--list")
    assert code == 0
    listed = {line.split()[1] for line in out.splitlines()[1:] if len(line.split()) > 2}
    assert set(KEX + KEM + SIG + AEAD) <= listed


def test_no_openssl_on_path_is_one_note_and_the_rest_still_prints(run_cli: Any,
                                                                   tmp_path: Any) -> None:
    # No --openssl: openssl is looked up on PATH, and its absence only skips the comparison.
    # (An explicit --openssl that does not exist is a usage error: test_speed_cli.py.)
    code, out, err = run_cli("speed", "--seconds", "0.01", "--compare-openssl", "x25519",
                             env={"PATH": str(tmp_path)})
    assert code == 0, err
    assert "253 bits ecdh (X25519)" in out
    notes = [line for line in out.splitlines() if "no openssl binary found" in line]
    assert len(notes) == 1 and "openssl not on PATH" in notes[0]


# --- openssl speed -------------------------------------------------------------------------

@needs_openssl
def test_compare_openssl_parses_real_output_and_gives_ratios(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "--seconds", "0.05", "--bytes", "16", "--json",
                             "--compare-openssl", "x25519", "aes-128-gcm", timeout=90)
    assert code == 0, err
    assert OPENSSL is not None
    comparison = json.loads(out)["openssl_comparison"]
    version = subprocess.run([OPENSSL, "version"], capture_output=True, text=True,
                             check=True).stdout
    assert comparison["version"] == version.strip() and comparison["error"] is None
    rows = {(r["algorithm"], r["operation"], r["block_size"]): r for r in comparison["rows"]}
    assert set(rows) == {("x25519", "keygen", None), ("x25519", "derive", None),
                         ("aes-128-gcm", "encrypt", 16)}
    for key in (("x25519", "derive", None), ("aes-128-gcm", "encrypt", 16)):
        row = rows[key]
        assert row["openssl"] > 0 and row["note"] is None
        assert row["ratio"] == pytest.approx(row["tlsprobe"] / row["openssl"])
        # Same machine, same primitive: far from the seconds column or a misread unit.
        assert 0.02 < row["ratio"] < 50, row
    assert rows[("aes-128-gcm", "encrypt", 16)]["unit"] == "bytes/s"
    assert any("-evp aes-128-gcm -aead -bytes 16" in c for c in comparison["commands"])


@needs_openssl
def test_table_parser_reads_what_openssl_prints() -> None:
    assert OPENSSL is not None
    done = subprocess.run([OPENSSL, "speed", "-seconds", "1", "-elapsed", "ed25519"],
                          capture_output=True, text=True, timeout=60, check=True)
    # The figures as openssl's own progress lines on stderr count them.
    signs = re.search(r"(\d+) 253 bits Ed25519 signs in ([\d.]+)s", done.stderr)
    assert signs, done.stderr
    (row,) = [r for r in openssl.parse_tables(done.stdout) if "Ed25519" in r.label]
    assert row.label == "253 bits EdDSA (Ed25519)"
    assert row.values["sign/s"] == pytest.approx(int(signs.group(1)) / float(signs.group(2)),
                                                 rel=0.02)


def test_cipher_table_parser_handles_both_number_forms() -> None:
    sample = ("The 'numbers' are in 1000s of bytes per second processed.\n"
              "type              2 bytes     31 bytes\n"
              "AES-128-CCM       6347.47k      9855.41 \n")
    assert openssl.parse_cipher_table(sample) == {
        "AES-128-CCM": {2: pytest.approx(6347470.0), 31: pytest.approx(9855.41)}}


def test_text_report_layout() -> None:
    report = SpeedReport("0.1.0", "50.0", "OpenSSL 4.0", 1.0, 1, (16,), (
        AlgorithmResult("x25519", "kex", "253 bits ecdh (X25519)",
                        (Figure("keygen", 40000, 1.0, 40000.0), Figure("derive", 20000, 1.0,
                                                                       20000.0))),
        AlgorithmResult("aes-128-gcm", "aead", "AES-128-GCM",
                        (Figure("encrypt", 1000000, 1.0, 1000000.0, 16),)),
    ))
    assert text.format_report(report).splitlines() == [
        "tlsprobe 0.1.0 speed: cryptography 50.0 with OpenSSL 4.0",
        "1 s per figure, 1 process",
        "",
        "Key exchange:",
        "                           keygen    derive  keygen/s  derive/s  bar:derive/s",
        "253 bits ecdh (X25519)  0.000025s 0.000050s   40000.0   20000.0  " + "█" * 20,
        "",
        "AEAD encryption:",
        "The 'numbers' are in 1000s of bytes per second processed.",
        "type              16 bytes  bar:16",
        "AES-128-GCM      16000.00k  " + "█" * 20,
    ]


def test_comparison_explains_small_block_ratios_only_when_aead_rows_are_there() -> None:
    kex_row = ComparisonRow("x25519", "derive", None, "ops/s", 30000.0, 29000.0)
    aead_row = ComparisonRow("aes-128-gcm", "encrypt", 16, "bytes/s", 3.1e7, 4.2e7)
    with_aead = comparison_lines(Comparison("openssl", "OpenSSL 3", 1, (kex_row, aead_row)), "x")
    kex_only = comparison_lines(Comparison("openssl", "OpenSSL 3", 1, (kex_row,)), "x")
    assert AEAD_CALL_NOTE in with_aead and AEAD_CALL_NOTE not in kex_only
    (line,) = [line for line in with_aead if line.startswith("aes-128-gcm")]
    assert line.split()[-1] == "0.74"
