"""Policy files: every key is held to its documented type and range (a wrong one is a one-line
usage error naming the key, exit 2, before any connection), and every rule a key asks for is
made, with or without the other keys (docs/POLICY.md "Policy file format")."""
from __future__ import annotations

import json

import pytest

#: (file name, contents, words the one error line must contain)
BAD_FILES = [
    ("order.json", '{"server_preferred_order": "no"}', "'server_preferred_order' must be true"),
    ("order.toml", 'server_preferred_order = "yes"\n', "'server_preferred_order' must be true"),
    ("dh_bool.json", '{"dh_min_bits": true}', "'dh_min_bits' must be a number of bits"),
    ("dh_neg.json", '{"dh_min_bits": -2048}', "'dh_min_bits' must be a number of bits"),
    ("rsa_zero.toml", "rsa_min_bits = 0\n", "'rsa_min_bits' must be a number of bits"),
    ("ver_bool.json", '{"versions": [true]}', "'versions': true is neither"),
    ("ver_int.json", '{"versions": [5]}', "unknown version 5 in 'versions'"),
    ("req_int.json", '{"required_versions": [772, 9]}', "unknown version 9 in"),
    ("grp_big.json", '{"groups": [99999999]}', "'groups': 99999999 is no code point"),
    ("grp_neg.json", '{"required_groups": [-1]}', "'required_groups': -1 is no code point"),
    ("suite_float.json", '{"cipher_suites": [1.5]}', "'cipher_suites': 1.5 is neither"),
    ("suite_null.json", '{"tls13_cipher_suites": [null]}', "'tls13_cipher_suites': null"),
    ("name_int.json", '{"name": 5}', "'name' must be a string"),
    ("name_date.toml", "name = 2024-01-01\n", "'name' must be a string"),
    ("title_table.json", '{"title": {"x": 1}}', "'title' must be a string"),
    ("source_list.toml", 'source = ["a"]\n', "'source' must be a string"),
]


@pytest.mark.parametrize(("name", "text", "words"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_wrong_type_or_value_is_a_one_line_usage_error(run_cli, tmp_path, name, text, words):
    """Before: `"server_preferred_order": "no"` asked for the server's order (bool("no")),
    `dh_min_bits = true` for 1 bit, `versions = [5]` allowed no real version, a group 99999999
    or -1 was kept, a name or title of any type was turned into text: all silently."""
    path = tmp_path / name
    path.write_text(text)
    code, out, err = run_cli("scan", "127.0.0.1:1", "--policy", str(path), "--no-progress")
    assert (code, out) == (2, ""), err
    assert err.startswith(f"tlsprobe: error: policy {path}: ") and err.count("\n") == 1, err
    assert words in err, err


def test_integer_code_points_in_range_still_load(tmp_path):
    """Documented: codepoints as integers (groups 4588, suites 0xc02f as 49199, versions)."""
    from tlsprobe.policy.load import load_policy
    path = tmp_path / "ints.json"
    path.write_text(json.dumps({"versions": [0x0303, "TLS 1.3"], "groups": [4588, "x25519"],
                                "cipher_suites": [49199], "dh_min_bits": 2048,
                                "server_preferred_order": False, "name": "ints"}))
    policy = load_policy(str(path))
    assert policy.versions == frozenset({0x0303, 0x0304})
    assert policy.groups == frozenset({0x11EC, 0x001D})
    assert policy.cipher_suites == frozenset({0xC02F})
    assert (policy.dh_min_bits, policy.server_preferred_order) == (2048, False)


def test_required_versions_alone_is_checked(run_cli, server_cache, tmp_path):
    """`required_versions` without `versions` asked for nothing before: a TLS 1.2-only
    server passed a policy that requires TLS 1.3. Each key is a rule of its own."""
    srv = server_cache("openssl", proto="tls1_2", groups="X25519:P-384")
    path = tmp_path / "needs13.json"
    path.write_text('{"required_versions": ["TLS 1.3"]}')
    code, out, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "versions",
                             "--policy", str(path), "--json", "--fail-on", "medium",
                             "--no-progress")
    found = [(f["code"], f["policy"], f["items"]) for f in json.loads(out)["findings"]
             if f["policy"] == "needs13"]
    assert found == [("version.missing", "needs13", ["TLS 1.3"])], (found, err)
    assert code == 1, err


def test_a_required_group_is_asked_before_it_is_called_missing(run_cli, server_cache, tmp_path):
    """A group a policy requires but the group audit does not offer by default (curveSM2 is
    outside its ranges) was reported as group.missing on a server that serves it: the rule
    counted "not in the supported list" as refused. Now the audit offers every required
    group, and group.missing needs the TLS 1.3 audit's refusal; a required group the server
    does refuse (X25519MLKEM768) is still missing."""
    srv = server_cache("pyopenssl", groups=["curveSM2", "X25519"], proto="tls1_3")
    path = tmp_path / "sm2.json"
    path.write_text('{"name": "sm2", "required_groups": ["curveSM2", "X25519MLKEM768"]}')
    code, out, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "groups",
                             "--policy", str(path), "--json", "--no-progress")
    report = json.loads(out)
    g13 = next(g for g in report["groups"] if g["version"]["name"] == "TLS 1.3")
    assert "curveSM2" in [g["name"] for g in g13["supported"]], (g13, err)
    missing = [f["items"] for f in report["findings"] if f["code"] == "group.missing"]
    assert missing == [["X25519MLKEM768"]], (missing, err)


@pytest.mark.parametrize(("curve", "found"), [("SECP521R1", True), ("SECP256R1", False)])
def test_mozilla_certificate_curves(run_cli, tmp_path, curve, found):
    """Mozilla's guidelines list the curves of an ECDSA certificate (certificate_curves:
    prime256v1, secp384r1); a P-521 certificate passed `modern` before, as the policies
    did not carry the list. certificate.curve_not_allowed names the curve; P-256 passes."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from tests.helpers.servers import start_server
    from tests.lab_servers.certs import named_set
    certs = named_set(tmp_path, "localhost", "localhost", "leaf", getattr(ec, curve)())
    server = start_server("openssl", cert="ecdsa", certs=certs, proto="tls1_3",
                          workdir=tmp_path / "srv")
    try:
        code, out, err = run_cli("scan", f"127.0.0.1:{server.port}", "--checks", "cert",
                                 "--policy", "modern", "--json", "--no-progress")
    finally:
        server.stop()
    findings = [(f["code"], f["policy"], f["message"]) for f in json.loads(out)["findings"]
                if f["code"].startswith("certificate.") and f["policy"] != "builtin"]
    expected = [("certificate.curve_not_allowed", "mozilla-modern-6.0",
                 "certificate key on secp521r1 (policy: secp256r1, secp384r1)")]
    assert findings == (expected if found else []), err


def test_toml_dotted_keys_name_finding_codes(run_cli, server_cache, tmp_path):
    """In TOML `certificate.self_signed = "low"` unquoted is a dotted key (a nested table):
    it was refused as "unknown finding code 'certificate' (did you mean ...)", naming the
    code the user wrote. It is that code: re-rated and waived as when quoted."""
    srv = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    path = tmp_path / "dotted.toml"
    path.write_text('name = "dotted"\n[severity]\ncertificate.self_signed = "low"\n'
                    '[waive]\ncheck.sct = "our CA logs nothing"\n')
    code, out, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "cert,sct",
                             "--policy", str(path), "--json", "--no-progress")
    assert code == 0, err
    report = json.loads(out)
    untrusted = [f["severity"] for f in report["findings"]
                 if f["code"] == "certificate.self_signed"]
    assert untrusted == ["low"], report["findings"]
    assert [f["waiver"] for f in report["waived"] if f["code"] == "check.sct"] == \
        ["our CA logs nothing"]
    path.write_text('[severity]\ncertificate.untrsted = "low"\n')
    code, out, err = run_cli("scan", "127.0.0.1:1", "--policy", str(path))
    assert code == 2 and "unknown finding code 'certificate.untrsted'" in err, err
