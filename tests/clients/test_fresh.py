"""The hello a simulation sends: the profile's bytes with only the fresh fields changed
(probes/clients/fresh.py), checked field by field, byte for byte with those fields masked,
and on the wire (a loopback listener keeps what tlsprobe sent): the profile's JA4 (and JA3
where the client keeps its extension order)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from tests.clients.conftest import Catcher, recorded_profiles, simulate
from tlsprobe import registry
from tlsprobe.engine.config import ClientConfig, build_client_hello
from tlsprobe.model.clients import ClientProfile, FailureReason, SimStatus
from tlsprobe.probes.clients.fresh import (
    ECH,
    ProfileError,
    fresh_hello,
    recorded_hello,
    retry_hello,
)
from tlsprobe.probes.clients.profiles import fingerprints, load_profiles
from tlsprobe.wire import decode_handshake
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.buffer import Writer
from tlsprobe.wire.handshake import frame
from tlsprobe.wire.hello import ClientHello


def _packaged() -> list[ClientProfile]:
    try:
        return list(load_profiles())
    except FileNotFoundError:   # before the packaged profiles land: the recorded ones only
        return []


ALL = list(recorded_profiles().values()) + _packaged()
IDS = [p.id for p in ALL]


def _decoded(raw: bytes) -> ClientHello:
    msg = decode_handshake(raw).message
    assert isinstance(msg, ClientHello)
    return msg


def _grease(value: int) -> int:
    return 0x0A0A if registry.is_grease(value) else value


def _masked_ext(e: ext.Extension) -> ext.Extension:
    """An extension with its fresh parts zeroed: GREASE types and list values, key share
    keys, the ECH GREASE payload."""
    if registry.is_grease(e.type):
        return ext.Extension(0x0A0A, e.data)
    if e.type in (ext.KEY_SHARE, ext.KEY_SHARE_DRAFT):   # 40: TLS 1.3 drafts <= 22
        entries = ext.Extension(ext.KEY_SHARE, e.data).decode()
        return ext.Extension(e.type, ext.key_share_client(
            [(_grease(k.group), bytes(len(k.key_exchange))) for k in entries]).data)
    if e.type == ECH:
        return ext.Extension(ECH, bytes(len(e.data)))
    if e.type in (ext.SUPPORTED_GROUPS, ext.SIGNATURE_ALGORITHMS, ext.SUPPORTED_VERSIONS):
        size = 1 if e.type == ext.SUPPORTED_VERSIONS else 2
        values = e.decode()
        w = Writer()
        with w.block(size):
            for v in values:
                w.push_uint16(_grease(v))
        return ext.Extension(e.type, w.data())
    return e


def _masked(hello: ClientHello) -> bytes:
    return frame(1, replace(hello, random=bytes(32),
                            legacy_session_id=bytes(len(hello.legacy_session_id)),
                            cipher_suites=[_grease(s) for s in hello.cipher_suites],
                            extensions=[_masked_ext(e) for e in hello.extensions]).serialize())


@pytest.mark.parametrize("profile", ALL, ids=IDS)
def test_only_the_fresh_fields_change(profile: ClientProfile) -> None:
    """Sent to the host name the profile was recorded with (localhost; no name for a hello
    recorded without server_name), the hello is the recorded one byte for byte once random,
    session id, key shares, GREASE and the ECH GREASE payload are masked; each of those is
    new, of the recorded length, but for a GREASE key share's bytes, which stay the
    client's fixed ones."""
    old = recorded_hello(profile.hello)
    sni = old.server_name      # None: recorded without server_name, sent without it
    fresh = fresh_hello(profile.hello, sni)
    raw = frame(1, fresh.built.hello.serialize())
    new = _decoded(raw)
    assert len(raw) == len(profile.hello)
    assert _masked(new) == _masked(old)
    assert new.random != old.random and len(new.random) == 32
    assert len(new.legacy_session_id) == len(old.legacy_session_id)
    assert new.legacy_session_id != old.legacy_session_id or not old.legacy_session_id
    assert [e.type for e in new.extensions if not registry.is_grease(e.type)] == \
        [e.type for e in old.extensions if not registry.is_grease(e.type)]
    for a, b in zip(old.key_shares, new.key_shares):
        assert len(a.key_exchange) == len(b.key_exchange)
        assert registry.is_grease(a.group) and registry.is_grease(b.group) or a.group == b.group
        if registry.is_grease(a.group):    # a GREASE share's bytes are the client's fixed ones
            assert a.key_exchange == b.key_exchange
        else:
            assert a.key_exchange != b.key_exchange
    assert set(fresh.built.shares) == {k.group for k in new.key_shares
                                       if not registry.is_grease(k.group)} - set(fresh.unusable)
    assert fingerprints(raw) == (profile.ja3, profile.ja4)


def test_grease_is_redrawn_per_connection_by_role() -> None:
    """Chromium's GREASE values change per connection; the two GREASE extensions always
    differ; supported_groups and key_share carry the same GREASE group (BoringSSL)."""
    chromium = recorded_profiles()["test-chromium"]
    old = recorded_hello(chromium.hello)
    seen: set[tuple[int, ...]] = set()
    for _ in range(40):
        new = fresh_hello(chromium.hello, "localhost").built.hello
        types = [e.type for e in new.extensions if registry.is_grease(e.type)]
        assert len(types) == 2 and types[0] != types[1]
        group = [g for g in new.supported_groups if registry.is_grease(g)]
        share = [k.group for k in new.key_shares if registry.is_grease(k.group)]
        assert len(group) == 1 and share == group
        seen.add((*types, new.cipher_suites[0], group[0]))
    assert len(seen) > 30   # drawn anew each time, not the recorded values
    assert old.cipher_suites[0] != 0 and len({s[2] for s in seen}) > 4


@pytest.mark.parametrize("name", ["test-curl", "test-python-ssl"])
def test_padding_keeps_the_recorded_length(name: str) -> None:
    """A client that pads to 512 bytes still sends 512 with a longer or no server_name."""
    profile = recorded_profiles()[name]
    for sni in ("a-much-longer-host-name.example.org", None):
        hello = fresh_hello(profile.hello, sni).built.hello
        assert len(frame(1, hello.serialize())) == len(profile.hello) == 512
        assert hello.server_name == sni


def test_an_ip_target_gets_no_server_name() -> None:
    profile = recorded_profiles()["test-firefox"]
    hello = fresh_hello(profile.hello, None).built.hello
    assert hello.extension(ext.SERVER_NAME) is None
    assert fingerprints(frame(1, hello.serialize()))[1].startswith("t13i")


def test_a_profile_with_a_psk_is_refused() -> None:
    profile = recorded_profiles()["test-openssl-s_client"]
    old = recorded_hello(profile.hello)
    psk = ext.pre_shared_key_client([(b"ticket", 0)], [bytes(32)])
    with_psk = frame(1, replace(old, extensions=[*old.extensions, psk]).serialize())
    with pytest.raises(ProfileError, match="pre_shared_key"):
        fresh_hello(with_psk, "localhost")


def test_a_share_kex_cannot_make_is_random_and_unusable() -> None:
    """X25519Kyber768Draft00 (0x6399) cannot be computed here: random bytes of the recorded
    length, the group marked unusable; x25519 beside it is a real share."""
    config = ClientConfig(server_name="localhost", groups=(0x6399, 0x001D),
                          key_share_groups=(0x6399, 0x001D))
    raw = frame(1, build_client_hello(config).hello.serialize())
    fresh = fresh_hello(raw, "localhost")
    assert fresh.unusable == (0x6399,)
    assert set(fresh.built.shares) == {0x001D}
    sizes = {k.group: len(k.key_exchange) for k in fresh.built.hello.key_shares}
    assert sizes == {k.group: len(k.key_exchange) for k in recorded_hello(raw).key_shares}


def test_the_retry_hello_after_an_hrr() -> None:
    """Same random, session id and GREASE; one fresh share for the asked group; the cookie
    added; padding recomputed to the recorded length."""
    for name in ("test-chromium", "test-curl"):
        profile = recorded_profiles()[name]
        first = fresh_hello(profile.hello, "localhost")
        second = retry_hello(first, 0x0018, b"cookie!").hello
        a = first.built.hello
        assert (second.random, second.legacy_session_id, second.cipher_suites) == \
            (a.random, a.legacy_session_id, a.cipher_suites)
        assert [(k.group, len(k.key_exchange)) for k in second.key_shares] == [(0x0018, 97)]
        types = [e.type for e in second.extensions]
        assert types[types.index(ext.KEY_SHARE) + 1] == ext.COOKIE
        assert [t for t in types if t != ext.COOKIE] == [e.type for e in a.extensions]
        if name == "test-curl":
            assert len(frame(1, second.serialize())) == 512


def _ja4_to_a_name(profile: ClientProfile) -> tuple[str, bool]:
    """The JA4 of the profile's hello sent to a host name, and whether its JA3 is the
    recorded one: a recording made without server_name (a capture of a client connecting
    to an IP address) gains one: 'i' becomes 'd', one extension more (JA4_b and JA4_c
    leave server_name out), the JA3 extension list changes."""
    hello = recorded_hello(profile.hello)
    if hello.extension(ext.SERVER_NAME) is not None or hello.extensions_absent:
        return profile.ja4, True
    a, rest = profile.ja4.split("_", 1)
    count = int(a[6:8]) + 1
    return f"{a[:3]}d{a[4:6]}{min(count, 99):02d}{a[8:]}_{rest}", False


def test_sent_hellos_on_the_wire_have_the_profile_fingerprints(catcher: Catcher) -> None:
    """What tlsprobe put on the wire to localhost (a listener keeps it) has each profile's
    JA4, and its JA3 where the client keeps its extension order; the result's ja4_sent says
    the same."""
    chosen = ALL
    sims = simulate(catcher.port, chosen)
    assert len(catcher.hellos) >= len(chosen)
    caught = [fingerprints(h) for h in catcher.hellos]
    for p in chosen:
        ja4, same_ja3 = _ja4_to_a_name(p)
        assert ja4 in {j4 for _, j4 in caught}, p.id
        if p.ja3_stable and same_ja3:
            assert p.ja3 in {j3 for j3, _ in caught}, p.id
        assert sims[p.id].ja4_sent == ja4
        # the listener closes without an answer, twice: a refusal with no known reason
        assert sims[p.id].status == SimStatus.failed
        assert sims[p.id].reason == FailureReason.refused


def test_the_record_version_is_the_profiles(catcher: Catcher) -> None:
    """The first record carries the profile's record_version (0x0301 as recorded here; a
    profile recorded with 0x0303 gets 0x0303)."""
    curl = recorded_profiles()["test-curl"]
    java_like = replace(curl, id="record-0303", record_version=0x0303)
    simulate(catcher.port, [curl])
    simulate(catcher.port, [java_like])
    assert set(catcher.record_versions[:2]) == {0x0301}
    assert set(catcher.record_versions[2:]) == {0x0303}
