"""The rating's rules on real loopback servers, one server per rule that triggers it (and,
where cheap, one that does not), each scanned through the CLI with only the phases and
checks the rule reads (docs/RATING.md names the servers):

- openssl s_server (OpenSSL 3.0): TLS 1.0/1.1 at SECLEVEL=0, TLS 1.0-1.1 only, TLS 1.2 only,
  static-RSA only (no forward secrecy), CBC only (no AEAD), DHE with a 1024-bit RFC 5114
  prime, NULL and anonymous suites, leaves made here (expired, SHA-1, RSA 1024 and 512);
- tlslite-ng (tests/checks/ssl3_server.py): SSL 3.0, RC4 and 3DES, which OpenSSL 3.0 does
  not serve;
- the vulnerable servers of tests/checks: OpenSSL 1.0.1f's Heartbleed and CCS, F5's
  Ticketbleed, a ROBOT oracle, DEFLATE (CRIME), SSLv2, no renegotiation_info;
- tests/checks/scripted_tls_server.py `--suite`: the suites no installable peer here still
  serves (OpenSSL 3.0 and tlslite-ng have neither): the RSA export suites 0x0008 and 0x0003
  (its first flight carries a ServerKeyExchange with a temporary 512-bit RSA key signed
  with the certificate's RSA 2048 key, as export servers sent it) and single DES 0x0009;
- gnutls-serv with %DISABLE_SAFE_RENEGOTIATION (insecure client-initiated renegotiation);
- nginx with Strict-Transport-Security (A+, and A- with a short max-age)."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.servers import CertSet, Server, start_server
from tests.rating.conftest import make_leaf, openssl_signed

ServerFactory = Callable[..., Server]
AUDIT = "versions,groups,suites,cert"
SECLEVEL0 = "DEFAULT:@SECLEVEL=0"


def scan(run_cli: Callable[..., Any], port: int, checks: str | None, *extra: str,
         ca: Path | str | None = None) -> tuple[dict[str, Any], int]:
    """The rating of one scan (JSON) and the exit code; `ca` the trust store ("system":
    the system bundle; None: --no-verify)."""
    doc, code = scan_json(run_cli, port, checks, *extra, ca=ca)
    return doc["rating"], code


def scan_json(run_cli: Callable[..., Any], port: int, checks: str | None, *extra: str,
              ca: Path | str | None = None) -> tuple[dict[str, Any], int]:
    """The JSON report of one scan (see `scan`) and the exit code."""
    args = ["scan", f"127.0.0.1:{port}", "--no-progress", "--json", "--timeout", "5",
            *(["--checks", checks] if checks else []), *extra]
    args += [] if ca == "system" else ["--cafile", str(ca)] if ca else ["--no-verify"]
    res = run_cli(*args, timeout=120)
    d = json.loads(res.stdout.splitlines()[0])
    assert d.get("error") is None, d.get("error")
    return d, res.returncode


def caps(rating: dict[str, Any]) -> dict[str, str]:
    return {c["rule"]: c["cap"] for c in rating["caps"]}


def warnings(rating: dict[str, Any]) -> list[str]:
    return [w["rule"] for w in rating["warnings"]]


@pytest.mark.needs_impl("openssl")
def test_tls10_and_tls11_cap_at_b_and_a_modern_server_is_not_capped(
        tls_server: ServerFactory, run_cli: Callable[..., Any], certs: CertSet) -> None:
    old = tls_server("openssl", proto="all", ciphers=SECLEVEL0)
    rating, _ = scan(run_cli, old.port, AUDIT, ca=certs.ca)
    assert caps(rating) == {"tls10_offered": "B", "tls11_offered": "B"}, rating["caps"]
    assert rating["grade"] == "B"
    assert rating["label"].startswith("B (capped: TLS 1.0 offered; TLS 1.1 offered")
    modern = tls_server("openssl", proto="both")
    rating, _ = scan(run_cli, modern.port, AUDIT, ca=certs.ca)
    assert caps(rating) == {} and rating["grade"] == "A" and warnings(rating) == []


@pytest.mark.needs_impl("openssl")
def test_no_tls12_caps_at_c_and_no_tls13_is_a_warning(
        tls_server: ServerFactory, run_cli: Callable[..., Any], certs: CertSet) -> None:
    legacy = tls_server("openssl", proto="tls1_0-tls1_1", ciphers=SECLEVEL0)
    rating, _ = scan(run_cli, legacy.port, "versions,suites")
    assert caps(rating)["no_tls12"] == "C" and rating["grade"] == "C"
    only12 = tls_server("openssl", proto="tls1_2")
    rating, _ = scan(run_cli, only12.port, AUDIT, ca=certs.ca)
    assert caps(rating) == {} and warnings(rating) == ["no_tls13"]
    assert rating["grade"] == "A-"


@pytest.mark.needs_impl("tlslite")
def test_ssl3_as_best_protocol_is_f_with_poodle_and_ssl3_beside_tls12_caps_at_b(
        script_server: Callable[..., int], run_cli: Callable[..., Any]) -> None:
    only = script_server("ssl3_server.py", "--ciphers", "aes128")
    rating, _ = scan(run_cli, only, "versions,suites,poodle")
    assert caps(rating) == {"ssl3_best": "F", "ssl3_offered": "B", "poodle": "C",
                            "no_tls12": "C", "no_forward_secrecy": "B", "no_aead": "B"}
    assert rating["grade"] == "F"
    both = script_server("ssl3_server.py", "--ciphers", "aes128gcm,aes128",
                         "--max-version", "tls1_2")
    rating, _ = scan(run_cli, both, "versions,suites,poodle")
    found = caps(rating)
    assert found["ssl3_offered"] == "B" and found["poodle"] == "C", rating["caps"]
    assert "ssl3_best" not in found and "no_tls12" not in found and rating["grade"] == "C"


@pytest.mark.needs_impl("tlslite")
def test_rc4_caps_at_b_and_in_tls12_at_c(script_server: Callable[..., int],
                                         run_cli: Callable[..., Any]) -> None:
    port = script_server("ssl3_server.py", "--ciphers", "rc4,aes128gcm", "--max-version",
                         "tls1_2")
    rating, _ = scan(run_cli, port, "versions,suites")
    found = caps(rating)
    assert found["rc4"] == "B" and found["rc4_modern"] == "C" and rating["grade"] == "C"
    assert "TLS_RSA_WITH_RC4_128_SHA (TLS 1.2)" in next(
        c["evidence"] for c in rating["caps"] if c["rule"] == "rc4_modern")


@pytest.mark.needs_impl("tlslite")
def test_3des_in_tls11_and_later_caps_at_c(script_server: Callable[..., int],
                                           run_cli: Callable[..., Any]) -> None:
    port = script_server("ssl3_server.py", "--ciphers", "3des,aes128gcm", "--max-version",
                         "tls1_2")
    rating, _ = scan(run_cli, port, "versions,suites")
    assert caps(rating)["sweet32"] == "C" and rating["grade"] == "C"
    clean = script_server("ssl3_server.py", "--ciphers", "aes128gcm", "--max-version",
                          "tls1_2")
    rating, _ = scan(run_cli, clean, "versions,suites")
    assert "sweet32" not in caps(rating) and "rc4" not in caps(rating)


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize(("ciphers", "rule"), [
    ("AES128-GCM-SHA256:AES256-GCM-SHA384", "no_forward_secrecy"),
    ("ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA", "no_aead"),
])
def test_no_forward_secrecy_and_no_aead_cap_at_b(
        tls_server: ServerFactory, run_cli: Callable[..., Any], certs: CertSet,
        ciphers: str, rule: str) -> None:
    srv = tls_server("openssl", proto="tls1_2", ciphers=ciphers)
    rating, _ = scan(run_cli, srv.port, AUDIT, ca=certs.ca)
    assert caps(rating) == {rule: "B"} and rating["grade"] == "B"


@pytest.mark.needs_impl("openssl")
def test_dhe_1024_caps_at_b(tls_server: ServerFactory, run_cli: Callable[..., Any],
                            certs: CertSet) -> None:
    srv = tls_server("openssl", proto="tls1_2", dhparam="rfc5114_1024_160",
                     ciphers="DHE-RSA-AES128-GCM-SHA256:@SECLEVEL=0")
    rating, _ = scan(run_cli, srv.port, AUDIT, ca=certs.ca)
    assert caps(rating) == {"weak_key": "B"} and rating["grade"] == "B"
    assert rating["key_exchange"]["score"] == 80
    assert any("1024 bits" in e for e in rating["caps"][0]["evidence"]), rating["caps"]


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize(("bits", "rule", "cap"), [(1024, "weak_key", "B"),
                                                   (512, "insecure_key", "F")])
def test_small_rsa_certificate_keys(tls_server: ServerFactory, run_cli: Callable[..., Any],
                                    certs: CertSet, tmp_path: Path, bits: int, rule: str,
                                    cap: str) -> None:
    mine = make_leaf(certs, tmp_path, "small", bits=bits)
    with start_server("openssl", proto="tls1_2", cert="small", certs=mine,
                      workdir=tmp_path / "srv",
                      ciphers="ECDHE-RSA-AES128-GCM-SHA256:AES128-GCM-SHA256:@SECLEVEL=0"
                      ) as srv:
        rating, _ = scan(run_cli, srv.port, AUDIT, ca=certs.ca)
    assert caps(rating)[rule] == cap, rating["caps"]
    # the chain check may refuse so small a key too (T): the grade without it is the cap's
    assert (rating["grade_ignoring_trust"] or rating["grade"]) == cap
    assert f"certificate RSA {bits} bits" in rating["key_exchange"]["detail"]


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize(("suite", "rule", "zero"), [
    ("NULL-SHA256", "null", "cipher_strength"),       # worst 0, best 128: 40, not 0
    ("ADH-AES128-GCM-SHA256", "anonymous", "key_exchange")])   # 0: the score is 0
def test_null_and_anonymous_suites_are_f(tls_server: ServerFactory,
                                         run_cli: Callable[..., Any], certs: CertSet,
                                         suite: str, rule: str, zero: str) -> None:
    srv = tls_server("openssl", proto="tls1_2",
                     ciphers=f"ECDHE-RSA-AES128-GCM-SHA256:{suite}:@SECLEVEL=0")
    rating, _ = scan(run_cli, srv.port, AUDIT, ca=certs.ca)
    assert caps(rating)[rule] == "F" and rating["grade"] == "F"
    assert (rating["score"] == 0) is (zero == "key_exchange"), rating["score"]


@pytest.mark.needs_impl("tlslite")
def test_heartbleed_and_ccs_are_f(script_server: Callable[..., int],
                                  run_cli: Callable[..., Any]) -> None:
    port = script_server("vulnerable_openssl101.py", "--heartbleed", "--ccs")
    rating, _ = scan(run_cli, port, "versions,heartbleed,ccs")
    assert {"heartbleed": "F", "ccs_injection": "F"}.items() <= caps(rating).items()
    assert rating["grade"] == "F"
    patched = script_server("vulnerable_openssl101.py")
    rating, _ = scan(run_cli, patched, "versions,heartbleed,ccs")
    assert not {"heartbleed", "ccs_injection"} & set(caps(rating))
    assert not {"heartbleed", "ccs_injection"} & {u["rule"] for u in rating["unknowns"]}


@pytest.mark.needs_impl("tlslite")
def test_ticketbleed_is_f(script_server: Callable[..., int],
                          run_cli: Callable[..., Any]) -> None:
    port = script_server("vulnerable_ticketbleed.py", "--f5")
    rating, _ = scan(run_cli, port, "versions,ticketbleed")
    assert caps(rating)["ticketbleed"] == "F" and rating["grade"] == "F"
    patched = script_server("vulnerable_ticketbleed.py")
    rating, _ = scan(run_cli, patched, "versions,ticketbleed")
    assert "ticketbleed" not in caps(rating)


@pytest.mark.needs_impl("tlslite")
def test_robot_is_f(script_server: Callable[..., int], run_cli: Callable[..., Any]) -> None:
    port = script_server("tlslite_quirks_server.py", "--robot", "strong")
    rating, _ = scan(run_cli, port, "versions,suites,robot")
    assert caps(rating)["robot"] == "F" and rating["grade"] == "F"


def test_compression_sslv2_and_missing_renegotiation_info(
        script_server: Callable[..., int], run_cli: Callable[..., Any]) -> None:
    checks = "versions,compression,sslv2,renegotiation"
    crime = script_server("scripted_tls_server.py", "--mode", "compression")
    rating, _ = scan(run_cli, crime, checks)
    assert caps(rating)["crime"] == "C"
    v2 = script_server("scripted_tls_server.py", "--mode", "sslv2")
    rating, _ = scan(run_cli, v2, checks)
    assert caps(rating)["sslv2"] == "F" and rating["grade"] == "F"
    assert rating["protocol_support"]["detail"].endswith("worst SSL 2.0 (0)")
    no_ri = script_server("scripted_tls_server.py", "--mode", "no-reneg-info")
    rating, _ = scan(run_cli, no_ri, checks)
    assert "no_secure_renegotiation" in warnings(rating)
    plain = script_server("scripted_tls_server.py", "--mode", "plain")
    rating, _ = scan(run_cli, plain, checks)
    assert not {"crime", "sslv2"} & set(caps(rating))
    assert "no_secure_renegotiation" not in warnings(rating)


@pytest.mark.needs_impl("gnutls")
def test_insecure_client_renegotiation_is_f(tls_server: ServerFactory,
                                            run_cli: Callable[..., Any]) -> None:
    checks = "versions,client_renegotiation,renegotiation"
    insecure = tls_server("gnutls", proto="tls1_2",
                          ciphers="NORMAL:%DISABLE_SAFE_RENEGOTIATION")
    rating, _ = scan(run_cli, insecure.port, checks)
    assert caps(rating)["insecure_renegotiation"] == "F" and rating["grade"] == "F"
    assert "no_secure_renegotiation" in warnings(rating)
    secure = tls_server("gnutls", proto="tls1_2")      # renegotiates, with RFC 5746
    rating, _ = scan(run_cli, secure.port, checks)
    assert "insecure_renegotiation" not in caps(rating)
    assert "insecure_renegotiation" not in {u["rule"] for u in rating["unknowns"]}


@pytest.mark.needs_impl("openssl")
def test_untrusted_mismatched_expired_and_sha1_certificates(
        tls_server: ServerFactory, run_cli: Callable[..., Any], certs: CertSet,
        tmp_path: Path) -> None:
    srv = tls_server("openssl", proto="both")
    rating, _ = scan(run_cli, srv.port, "versions,cert", ca="system")
    assert caps(rating) in ({"cert_self_signed": "T"}, {"cert_untrusted": "T"}), rating["caps"]
    assert rating["grade"] == "T" and rating["grade_ignoring_trust"] is not None
    rating, _ = scan(run_cli, srv.port, "versions,cert", "--sni", "other.example",
                     ca=certs.ca)
    assert caps(rating) == {"cert_mismatch": "M"} and rating["grade"] == "M"
    rating, _ = scan(run_cli, srv.port, "versions,cert", ca=certs.ca)
    assert caps(rating) == {} and rating["grade"] != "T"
    with start_server("openssl", proto="both", cert="old", workdir=tmp_path / "old",
                      certs=make_leaf(certs, tmp_path, "old", days=(-60, -1))) as expired:
        rating, _ = scan(run_cli, expired.port, "versions,cert", ca=certs.ca)
    assert caps(rating)["cert_expired"] == "T" and rating["grade"] == "T"
    with start_server("openssl", proto="both", cert="new", workdir=tmp_path / "new",
                      certs=make_leaf(certs, tmp_path, "new", days=(2, 60))) as early:
        rating, _ = scan(run_cli, early.port, "versions,cert", ca=certs.ca)
    assert caps(rating)["cert_not_yet_valid"] == "T" and rating["grade"] == "T"
    for digest, rule, cap in (("sha1", "cert_sha1", "T"), ("md5", "cert_md5", "F")):
        with start_server("openssl", proto="tls1_2", cert=digest, ciphers=SECLEVEL0,
                          workdir=tmp_path / digest,
                          certs=openssl_signed(certs, tmp_path, digest, digest)) as srv:
            rating, _ = scan(run_cli, srv.port, "versions,cert", ca=certs.ca)
        assert caps(rating)[rule] == cap, rating["caps"]
        assert rating["grade"] == "T"       # neither verifies: T, whatever else


HSTS = 'add_header Strict-Transport-Security "max-age={}" always;'


@pytest.mark.needs_impl("nginx")
def test_long_hsts_on_a_modern_server_is_a_plus_and_a_short_one_a_minus(
        tls_server: ServerFactory, run_cli: Callable[..., Any], certs: CertSet) -> None:
    good = tls_server("nginx", proto="both", extra=[HSTS.format(31536000)])
    rating, code = scan(run_cli, good.port, None, ca=certs.ca)    # the default scan
    assert (rating["grade"], rating["provisional"], rating["unknowns"]) == ("A+", False, [])
    assert code == 0
    short = tls_server("nginx", proto="both", extra=[HSTS.format(86400)])
    rating, _ = scan(run_cli, short.port, AUDIT + ",hsts", ca=certs.ca)
    assert warnings(rating) == ["hsts_short"] and rating["grade"] == "A-"


@pytest.mark.needs_impl("nginx")
@pytest.mark.parametrize(("header", "warning"), [
    ('add_header Strict-Transport-Security "max-age=0" always;', "hsts_disabled"),
    ('add_header Strict-Transport-Security "includeSubDomains" always;', "hsts_invalid"),
    ("", None)])
def test_hsts_switched_off_or_without_max_age_is_a_minus_and_none_is_a(
        tls_server: ServerFactory, run_cli: Callable[..., Any], certs: CertSet,
        header: str, warning: str | None) -> None:
    srv = tls_server("nginx", proto="both", extra=[header] if header else [])
    rating, _ = scan(run_cli, srv.port, AUDIT + ",hsts", ca=certs.ca)
    if warning is None:     # no header: no A+, and no warning either (the guide)
        assert warnings(rating) == [] and rating["grade"] == "A"
    else:
        assert warnings(rating) == [warning] and rating["grade"] == "A-"


@pytest.mark.parametrize(("suite", "name"), [
    ("0x0008", "TLS_RSA_EXPORT_WITH_DES40_CBC_SHA"),
    ("0x0003", "TLS_RSA_EXPORT_WITH_RC4_40_MD5")])
def test_export_suites_are_f(script_server: Callable[..., int],
                             run_cli: Callable[..., Any], suite: str, name: str) -> None:
    port = script_server("scripted_tls_server.py", "--mode", "plain", "--suite", suite)
    doc, _ = scan_json(run_cli, port, "versions,suites")
    rating = doc["rating"]
    assert caps(rating)["export"] == "F" and rating["grade"] == "F", rating["caps"]
    assert caps(rating)["weak_cipher"] == "F"         # 40 bits: under 112 too
    # the export key exchange scores 40 (the guide): insecure, whatever the leaf's size
    assert caps(rating)["insecure_key"] == "F"
    assert rating["key_exchange"]["detail"] == f"weakest: export suite {name} (40)"
    # the flight was read whole: the temporary key of its ServerKeyExchange, whose signature
    # the engine checked (a bad one leaves a note), in TLS 1.0, 1.1 (MD5+SHA-1) and 1.2
    assert [a["version"]["name"] for a in doc["suites"]] == ["TLS 1.2", "TLS 1.1", "TLS 1.0"]
    for audit in doc["suites"]:
        assert audit["notes"] == [] and len(audit["rows"]) == 1, audit
        row = audit["rows"][0]
        assert (row["suite"]["iana_name"], row["kx_label"], row["kx_source"]) == \
            (name, "RSA 512", "server_key_exchange"), row


def test_single_des_is_f_and_aes_is_not(script_server: Callable[..., int],
                                         run_cli: Callable[..., Any]) -> None:
    port = script_server("scripted_tls_server.py", "--mode", "plain", "--suite", "0x0009")
    rating, _ = scan(run_cli, port, "versions,suites")
    found = caps(rating)
    assert found["weak_cipher"] == "F" and rating["grade"] == "F", rating["caps"]
    assert "export" not in found and "insecure_key" not in found
    assert "TLS_RSA_WITH_DES_CBC_SHA (TLS 1.2, 56 bits)" in next(
        c["evidence"] for c in rating["caps"] if c["rule"] == "weak_cipher")
    assert rating["cipher_strength"]["detail"] == "best 56 bits (20), worst 56 bits (20)"
    aes = script_server("scripted_tls_server.py", "--mode", "plain")   # AES-128 (0x002f)
    rating, _ = scan(run_cli, aes, "versions,suites")
    assert not {"weak_cipher", "export", "insecure_key"} & set(caps(rating)), rating["caps"]
