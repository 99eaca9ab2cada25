"""Tests for tlsprobe.kex: round trips, interop with independent implementations, validation.

Independent peers: tlslite-ng (python-ecdsa for the curves, pure-Python X25519/X448 and
FFDH, kyber-py for ML-KEM), kyber-py directly, and Python integers for finite-field math.
"""

from __future__ import annotations

import importlib.util
import json
import os
import warnings

import pytest
from tests.helpers.shared_data import lab_dh_dir, shared_missing
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, mlkem, padding, rsa
from cryptography.utils import CryptographyDeprecationWarning
from hypothesis import given, settings
from hypothesis import strategies as st

from tlsprobe import kex
from tlsprobe.kex import DHShare, InvalidShare, UnsupportedGroup
from tlsprobe.kex.ffdhe_primes import FFDHE_GROUPS
from tlsprobe.kex.mlkem import modulus_check, random_encapsulation_key

LAB_DH = lab_dh_dir()
HAVE_KYBER_PY = importlib.util.find_spec("kyber_py") is not None

# group -> (client share, server share, shared secret) sizes, from the RFCs and drafts
EXPECTED: dict[int, tuple[int, int, int]] = {
    0x0013: (49, 49, 24), 0x0015: (57, 57, 28), 0x0016: (65, 65, 32),
    0x0017: (65, 65, 32), 0x0018: (97, 97, 48), 0x0019: (133, 133, 66),
    0x001a: (65, 65, 32), 0x001b: (97, 97, 48), 0x001c: (129, 129, 64),
    0x001d: (32, 32, 32), 0x001e: (56, 56, 56),
    0x001f: (65, 65, 32), 0x0020: (97, 97, 48), 0x0021: (129, 129, 64),
    0x0100: (256, 256, 256), 0x0101: (384, 384, 384), 0x0102: (512, 512, 512),
    0x0103: (768, 768, 768), 0x0104: (1024, 1024, 1024),
    0x0200: (800, 768, 32), 0x0201: (1184, 1088, 32), 0x0202: (1568, 1568, 32),
    0x11eb: (65 + 1184, 65 + 1088, 64), 0x11ec: (1184 + 32, 1088 + 32, 64),
    0x11ed: (97 + 1568, 97 + 1568, 80),
}
EC_GROUPS = [g for g in EXPECTED if g < 0x100 and g not in (0x1d, 0x1e)]
X_GROUPS = [0x1d, 0x1e]
FFDHE = list(range(0x100, 0x105))
HYBRIDS = [0x11eb, 0x11ec, 0x11ed]
P2048 = FFDHE_GROUPS[0x100][1]


# -- registry -------------------------------------------------------------------------------
def test_computable_groups_cover_the_brief() -> None:
    expected = set(EXPECTED) - ({0x0200} if not HAVE_KYBER_PY else set())
    assert set(kex.computable_groups()) == expected
    assert kex.computable_groups() == sorted(kex.computable_groups())


@pytest.mark.parametrize("group", sorted(EXPECTED))
def test_share_size(group: int) -> None:
    client, server, _secret = EXPECTED[group]
    assert kex.share_size(group) == client
    assert kex.share_size(group, "server") == server


def test_share_size_unknown_and_bad_role() -> None:
    assert kex.share_size(0x0a0a) is None
    assert kex.share_size(0xfe12) is None
    assert kex.share_size(0x6399) == 1216 and kex.share_size(0x6399, "server") == 1120
    with pytest.raises(ValueError, match="role"):
        kex.share_size(0x1d, "peer")


@pytest.mark.parametrize("group", [0x0a0a, 0xfafa, 0x6399, 0x0029, 0xfe00, 0x0001])
def test_unsupported_groups(group: int) -> None:
    with pytest.raises(UnsupportedGroup):
        kex.generate(group)
    with pytest.raises(UnsupportedGroup):
        kex.respond(group, b"\x00" * 32)


# -- round trips ----------------------------------------------------------------------------
@pytest.mark.parametrize("group", kex.computable_groups())
def test_round_trip(group: int) -> None:
    client = kex.generate(group)
    server_public, server_secret = kex.respond(group, client.public)
    client_size, server_size, secret_size = EXPECTED[group]
    assert client.group == group
    assert len(client.public) == client_size
    assert len(server_public) == server_size
    assert len(server_secret) == secret_size
    kex.validate_server_share(group, server_public)
    kex.validate_client_share(group, client.public)
    assert client.shared_secret(server_public) == server_secret
    # every call makes a fresh key
    assert kex.generate(group).public != client.public


@pytest.mark.parametrize("group", EC_GROUPS)
def test_ec_share_is_an_uncompressed_point_on_the_curve(group: int) -> None:
    share = kex.generate(group)
    assert share.public[0] == 0x04
    curve = kex.REGISTRY[group].curve  # type: ignore[attr-defined]
    point = ec.EllipticCurvePublicKey.from_encoded_point(curve, share.public)
    assert point.public_numbers().x.to_bytes(len(share.public) // 2, "big") == \
        share.public[1:1 + len(share.public) // 2]


def test_tls13_brainpool_codepoints_use_the_same_curves() -> None:
    for legacy, tls13 in ((0x1a, 0x1f), (0x1b, 0x20), (0x1c, 0x21)):
        server = kex.generate(legacy)
        client = kex.generate(tls13)
        assert client.shared_secret(server.public) == server.shared_secret(client.public)


# -- interop with tlslite-ng ----------------------------------------------------------------
def _tlslite():  # type: ignore[no-untyped-def]
    keyexchange = pytest.importorskip("tlslite.keyexchange")
    return keyexchange


@pytest.mark.parametrize("group", EC_GROUPS + X_GROUPS + FFDHE[:2])
def test_interop_tlslite_dh_groups(group: int) -> None:
    tl = _tlslite()
    peer = (tl.FFDHKeyExchange(group, (3, 4)) if group >= 0x100
            else tl.ECDHKeyExchange(group, (3, 4)))
    peer_private = peer.get_random_private_key()
    peer_public = bytes(peer.calc_public_value(peer_private))
    ours = kex.generate(group)
    secret = ours.shared_secret(peer_public)
    assert secret == bytes(peer.calc_shared_key(peer_private, bytearray(ours.public)))
    # and the other way round: we are the server for tlslite's client share
    server_public, server_secret = kex.respond(group, peer_public)
    assert server_secret == bytes(peer.calc_shared_key(peer_private, bytearray(server_public)))


@pytest.mark.parametrize("group", HYBRIDS)
def test_interop_tlslite_hybrid_client(group: int) -> None:
    """Our client share, tlslite-ng (kyber-py) as the server."""
    tl = _tlslite()
    if not tl.ML_KEM_AVAILABLE:
        pytest.skip("tlslite-ng without kyber-py")
    ours = kex.generate(group)
    secret, server_share = tl.KEMKeyExchange(group, (3, 4)).encapsulate_key(
        bytearray(ours.public))
    kex.validate_server_share(group, bytes(server_share))
    assert ours.shared_secret(bytes(server_share)) == bytes(secret)


@pytest.mark.parametrize("group", HYBRIDS)
def test_interop_tlslite_hybrid_server(group: int) -> None:
    """tlslite-ng's client share, our server side."""
    tl = _tlslite()
    if not tl.ML_KEM_AVAILABLE:
        pytest.skip("tlslite-ng without kyber-py")
    peer = tl.KEMKeyExchange(group, (3, 4))
    private = peer.get_random_private_key()
    client_public = bytes(peer.calc_public_value(private))
    server_public, secret = kex.respond(group, client_public)
    assert bytes(peer.calc_shared_key(private, bytearray(server_public))) == secret


@pytest.mark.parametrize("group", [0x11ec])
def test_x25519mlkem768_layout_against_kyber_py(group: int) -> None:
    """Decompose our share by hand: ML-KEM-768 ek first, X25519 last (and in the secret)."""
    from cryptography.hazmat.primitives.asymmetric import x25519

    ml_kem = pytest.importorskip("kyber_py.ml_kem")
    ours = kex.generate(group)
    ek, x_public = ours.public[:1184], ours.public[1184:]
    kem_secret, ct = ml_kem.ML_KEM_768.encaps(ek)
    x_private = x25519.X25519PrivateKey.generate()
    x_secret = x_private.exchange(x25519.X25519PublicKey.from_public_bytes(x_public))
    server_share = ct + x_private.public_key().public_bytes_raw()
    assert ours.shared_secret(server_share) == kem_secret + x_secret


@pytest.mark.skipif(not HAVE_KYBER_PY, reason="kyber-py not installed")
@pytest.mark.parametrize("group,level", [(0x0201, 768), (0x0202, 1024)])
def test_mlkem_against_kyber_py(group: int, level: int) -> None:
    from kyber_py import ml_kem

    scheme = getattr(ml_kem, f"ML_KEM_{level}")
    ours = kex.generate(group)
    secret, ct = scheme.encaps(ours.public)
    assert ours.shared_secret(ct) == secret
    ek, dk = scheme.keygen()
    ct2, secret2 = kex.respond(group, ek)
    assert scheme.decaps(dk, ct2) == secret2


def test_mlkem512_backend_is_kyber_py_only_when_cryptography_lacks_it() -> None:
    has_512 = hasattr(mlkem, "MLKEM512PrivateKey")
    if 0x0200 not in kex.REGISTRY:
        assert not has_512 and not HAVE_KYBER_PY
        return
    expected = "cryptography" if has_512 else "kyber-py"
    assert kex.REGISTRY[0x0200].backend.source == expected  # type: ignore[attr-defined]
    assert kex.REGISTRY[0x0201].backend.source == "cryptography"  # type: ignore[attr-defined]


# -- finite-field DH ------------------------------------------------------------------------
def test_ffdhe_primes_match_lab_files() -> None:
    if not LAB_DH.is_dir():
        shared_missing("lab DH parameters", LAB_DH)
    for name, p in FFDHE_GROUPS.values():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CryptographyDeprecationWarning)
            from cryptography.hazmat.primitives.serialization import load_pem_parameters

            params = load_pem_parameters((LAB_DH / f"{name}.pem").read_bytes())
        numbers = params.parameter_numbers()
        assert (numbers.p, numbers.g) == (p, 2), name
    known = json.loads((LAB_DH / "known_dh_primes.json").read_text())
    for name, p in FFDHE_GROUPS.values():
        assert int(known[name]["p"], 16) == p


def _share_with_leading_zero_secret(share: DHShare) -> tuple[bytes, int]:
    """A peer value (from Python integers) whose Z with our share starts with a zero byte."""
    yc = int.from_bytes(share.public, "big")
    for x in range(2**64, 2**64 + 5000):
        z = pow(yc, x, share.p)
        if z < 1 << (8 * (share.p_size - 1)):
            return pow(share.g, x, share.p).to_bytes(share.p_size, "big"), z
    raise AssertionError("no leading-zero secret in 5000 tries")  # p = 2^-8 per try


def test_dh_tls13_pads_and_tls12_strips() -> None:
    share = kex.generate(0x0100)
    assert isinstance(share, DHShare)
    peer, z = _share_with_leading_zero_secret(share)
    assert share.shared_secret(peer) == z.to_bytes(256, "big")
    assert share.premaster_secret(peer) == z.to_bytes((z.bit_length() + 7) // 8, "big")
    assert len(share.premaster_secret(peer)) < 256


def test_dhe_arbitrary_parameters_against_python_ints() -> None:
    """TLS 1.2 DHE with the server's p, g (here RFC 3526 group 14, generator 2)."""
    modp2048 = int(
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879"
        "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B"
        "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA4836"
        "1C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804"
        "F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6"
        "955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF", 16)
    share = DHShare(modp2048, 2)
    assert share.group == 0 and share.p_bits == 2048 and len(share.public) == 256
    x = int.from_bytes(os.urandom(32), "big")
    ys = pow(2, x, modp2048)
    z = pow(int.from_bytes(share.public, "big"), x, modp2048)
    ys_minimal = ys.to_bytes((ys.bit_length() + 7) // 8, "big")
    assert share.premaster_secret(ys_minimal) == z.to_bytes((z.bit_length() + 7) // 8, "big")
    assert share.premaster_secret(b"\x00\x00" + ys_minimal) == share.premaster_secret(ys_minimal)


def test_dhe_interop_tlslite_tls12() -> None:
    tl = _tlslite()
    peer = tl.FFDHKeyExchange(None, (3, 3), generator=2, prime=P2048)
    private = peer.get_random_private_key()
    ys = peer.calc_public_value(private)  # an int in TLS 1.2
    share = DHShare(P2048, 2)
    ours = share.premaster_secret(ys.to_bytes((ys.bit_length() + 7) // 8, "big"))
    assert ours == bytes(peer.calc_shared_key(private, int.from_bytes(share.public, "big")))


@pytest.mark.parametrize("y", [0, 1, P2048 - 1, P2048, P2048 + 1])
def test_ffdhe_rejects_out_of_range_y(y: int) -> None:
    data = y.to_bytes(256, "big")
    share = kex.generate(0x0100)
    for check in (lambda: kex.validate_server_share(0x0100, data),
                  lambda: share.shared_secret(data), lambda: share.premaster_secret(data)):
        with pytest.raises(InvalidShare):
            check()


def test_dh_y_messages() -> None:
    share = DHShare(P2048, 2)
    with pytest.raises(InvalidShare, match=r"Y = 1 \(must be 1 < Y < p-1\)"):
        share.premaster_secret(b"\x01")
    with pytest.raises(InvalidShare, match=r"Y = p-1"):
        share.premaster_secret((P2048 - 1).to_bytes(256, "big"))
    with pytest.raises(InvalidShare, match="empty"):
        share.premaster_secret(b"")


def test_dh_bad_parameters() -> None:
    with pytest.raises(InvalidShare, match="odd prime"):
        DHShare(P2048 + 1, 2)
    with pytest.raises(InvalidShare, match="generator"):
        DHShare(P2048, 1)
    with pytest.raises(UnsupportedGroup, match="below the 512-bit"):
        DHShare(2**255 - 19, 2)
    # a prime that is not a safe prime (2^521 - 1: (p-1)/2 is divisible by 3) is refused
    with pytest.raises(UnsupportedGroup, match="not a safe prime"):
        DHShare(2**521 - 1, 3)


# -- invalid shares -------------------------------------------------------------------------
@pytest.mark.parametrize("group", kex.computable_groups())
def test_wrong_sizes_rejected(group: int) -> None:
    client = kex.generate(group)
    server_public, _ = kex.respond(group, client.public)
    for bad in (server_public[:-1], server_public + b"\x00", b""):
        with pytest.raises(InvalidShare, match="bytes, expected"):
            kex.validate_server_share(group, bad)
        with pytest.raises(InvalidShare):
            client.shared_secret(bad)
    with pytest.raises(InvalidShare):
        kex.respond(group, client.public[:-1])


@pytest.mark.parametrize("group", EC_GROUPS)
def test_point_off_curve_rejected(group: int) -> None:
    share = kex.generate(group)
    good = kex.generate(group).public
    off = good[:-1] + bytes([good[-1] ^ 1])
    with pytest.raises(InvalidShare, match="not on the curve"):
        share.shared_secret(off)
    with pytest.raises(InvalidShare, match="not on the curve"):
        kex.respond(group, off)
    with pytest.raises(InvalidShare, match="point at infinity"):
        kex.validate_server_share(group, b"\x00")
    size = (len(good) - 1) // 2
    with pytest.raises(InvalidShare, match="compressed"):
        kex.validate_server_share(group, bytes([2 + (good[-1] & 1)]) + good[1:1 + size])
    with pytest.raises(InvalidShare, match="point format 0x05"):
        kex.validate_server_share(group, b"\x05" + good[1:])


@pytest.mark.parametrize("group", X_GROUPS)
def test_low_order_x_points_rejected(group: int) -> None:
    size = EXPECTED[group][0]
    share = kex.generate(group)
    for low_order in (bytes(size), (1).to_bytes(size, "little")):
        with pytest.raises(InvalidShare, match="all zero"):
            share.shared_secret(low_order)
        with pytest.raises(InvalidShare, match="all zero"):
            kex.respond(group, low_order)


def test_hybrid_rejects_bad_classical_part_with_both_names() -> None:
    share = kex.generate(0x11ec)
    server_public, _ = kex.respond(0x11ec, share.public)
    with pytest.raises(InvalidShare, match="X25519MLKEM768: x25519: .*all zero"):
        share.shared_secret(server_public[:1088] + bytes(32))
    p256 = kex.generate(0x11eb)
    server_public, _ = kex.respond(0x11eb, p256.public)
    bad = b"\x04" + bytes(64) + server_public[65:]
    with pytest.raises(InvalidShare, match="SecP256r1MLKEM768: secp256r1: .*not on the curve"):
        p256.shared_secret(bad)


@pytest.mark.parametrize("group", [g for g in (0x0200, 0x0201, 0x0202, 0x11ec)
                                   if g in kex.REGISTRY])
def test_mlkem_encapsulation_key_modulus_check(group: int) -> None:
    ek_bad = bytearray(kex.generate(group).public)
    ek_bad[0:3] = b"\xff\xff\xff"  # coefficients 4095 >= q (the ek comes first in 0x11ec)
    with pytest.raises(InvalidShare, match="modulus check"):
        kex.respond(group, bytes(ek_bad))
    with pytest.raises(InvalidShare, match="modulus check"):
        kex.validate_client_share(group, bytes(ek_bad))


def test_mlkem_premaster_is_tls13_only() -> None:
    with pytest.raises(UnsupportedGroup, match="TLS 1.3"):
        kex.generate(0x11ec).premaster_secret(b"\x00" * 1120)


def test_ecdhe_tls12_premaster_against_tlslite() -> None:
    tl = _tlslite()
    peer = tl.ECDHKeyExchange(0x17, (3, 3))
    private = peer.get_random_private_key()
    share = kex.generate(0x17)
    pms = share.premaster_secret(bytes(peer.calc_public_value(private)))
    assert pms == bytes(peer.calc_shared_key(private, bytearray(share.public)))


@settings(max_examples=60, deadline=None)
@given(group=st.sampled_from([0x1d, 0x17, 0x19, 0x100, 0x201, 0x11ec]),
       data=st.binary(max_size=1300))
def test_any_bytes_give_a_secret_or_invalid_share(group: int, data: bytes) -> None:
    share = _CACHED.setdefault(group, kex.generate(group))
    try:
        kex.validate_server_share(group, data)
        assert isinstance(share.shared_secret(data), bytes)
    except InvalidShare:
        pass


@settings(max_examples=30, deadline=None)
@given(size_delta=st.sampled_from([0, 0, -1, 1]), data=st.data())
def test_random_server_share_for_x25519mlkem768(size_delta: int, data: st.DataObject) -> None:
    """Any ciphertext of the right size decapsulates (implicit rejection); others fail."""
    blob = data.draw(st.binary(min_size=1120 + size_delta, max_size=1120 + size_delta))
    share = _CACHED.setdefault(0x11ec, kex.generate(0x11ec))
    if size_delta:
        with pytest.raises(InvalidShare, match="expected 1120"):
            share.shared_secret(blob)
    elif _x25519_low_order(blob[1088:]):
        with pytest.raises(InvalidShare, match="all zero"):
            share.shared_secret(blob)
    else:
        assert len(share.shared_secret(blob)) == 64


def _x25519_low_order(u: bytes) -> bool:
    """Clamped scalars are multiples of 8, so a low-order u gives zero with any key."""
    from cryptography.hazmat.primitives.asymmetric import x25519

    try:
        x25519.X25519PrivateKey.generate().exchange(x25519.X25519PublicKey.from_public_bytes(u))
    except ValueError:
        return True
    return False


_CACHED: dict[int, kex.KeyShare] = {}


# -- offer-only shares ----------------------------------------------------------------------
def test_offer_only_shares() -> None:
    assert kex.offer_only_share(0x2a2a) == b"\x00"
    assert len(kex.offer_only_share(0xfe00)) == 32
    assert len(kex.offer_only_share(0xfe00, 100)) == 100
    assert len(kex.offer_only_share(0x6399)) == 1216
    x25519 = kex.offer_only_share(0x1d)
    kex.validate_client_share(0x1d, x25519)
    with pytest.raises(ValueError):
        kex.offer_only_share(0x1d, 0)


@pytest.mark.parametrize("k,level", [(3, 768), (4, 1024)])
def test_random_encapsulation_key_is_accepted_by_cryptography(k: int, level: int) -> None:
    ek = random_encapsulation_key(k)
    assert len(ek) == 384 * k + 32 and modulus_check(ek, k)
    public_cls = getattr(mlkem, f"MLKEM{level}PublicKey")
    public_cls.from_public_bytes(ek).encapsulate()  # raises on a malformed key


def test_validate_server_share_for_offer_only_and_unknown() -> None:
    kex.validate_server_share(0x6399, bytes(1120))
    with pytest.raises(InvalidShare, match="expected 1120"):
        kex.validate_server_share(0x6399, bytes(1119))
    with pytest.raises(UnsupportedGroup):
        kex.validate_server_share(0xfe00, bytes(32))


# -- RSA key transport ----------------------------------------------------------------------
def test_rsa_encrypt_premaster() -> None:
    key = rsa.generate_private_key(65537, 2048)
    premaster, encrypted = kex.rsa_encrypt_premaster(key.public_key(), 0x0303)
    assert len(premaster) == 48 and premaster[:2] == b"\x03\x03" and len(encrypted) == 256
    assert key.decrypt(encrypted, padding.PKCS1v15()) == premaster
    again, _ = kex.rsa_encrypt_premaster(key.public_key(), 0x0303)
    assert again != premaster


def test_rsa_encrypt_premaster_from_certificate_and_wrong_key() -> None:
    import datetime

    key = rsa.generate_private_key(65537, 2048)
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    premaster, encrypted = kex.rsa_encrypt_premaster(cert, 0x0301)
    assert key.decrypt(encrypted, padding.PKCS1v15()) == premaster
    assert premaster[:2] == b"\x03\x01"
    ec_key = ec.generate_private_key(ec.SECP256R1()).public_key()
    with pytest.raises(InvalidShare, match="needs an RSA key"):
        kex.rsa_encrypt_premaster(ec_key, 0x0303)  # type: ignore[arg-type]
