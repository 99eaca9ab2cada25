"""Key-log decryption glue: SSLKEYLOGFILE secrets -> record protection on a connection.

When the ServerHello of a connection is seen, its client random selects the logged
secrets. TLS 1.3: the handshake traffic secrets (CLIENT_/SERVER_HANDSHAKE_TRAFFIC_SECRET)
decrypt the encrypted handshake; each side switches to its application traffic secret
(CLIENT_/SERVER_TRAFFIC_SECRET_0) after its Finished, and to the next one after each
KeyUpdate it sends. TLS 1.0-1.2: the master secret (CLIENT_RANDOM) and both randoms give the
key block; the session.Flow applies the protection after each side's ChangeCipherSpec.
All cryptography is the engine's (keyschedule, prf, protection).
"""

from __future__ import annotations

from collections.abc import Callable

from tlsprobe.engine import keylog as kl
from tlsprobe.engine.common import RecordDeprotector
from tlsprobe.engine.keylog import KeyLog
from tlsprobe.engine.keyschedule import (
    next_traffic_secret,
    tls13_hash_name,
    traffic_keys,
)
from tlsprobe.engine.prf import key_block
from tlsprobe.engine.protection import Tls13Protection, protections_from_key_block
from tlsprobe.engine.suites import suite_params
from tlsprobe.offline.facts import CLIENT, SERVER, Facts

SetDeprotector = Callable[[int, RecordDeprotector | None], None]
_APP = {CLIENT: kl.CLIENT_TRAFFIC_SECRET_0, SERVER: kl.SERVER_TRAFFIC_SECRET_0}
_HANDSHAKE = {CLIENT: kl.CLIENT_HANDSHAKE_TRAFFIC_SECRET,
              SERVER: kl.SERVER_HANDSHAKE_TRAFFIC_SECRET}


class Decryptor:
    """Per-connection: installs deprotectors through `set_deprotector(direction, d)`."""

    def __init__(self, keylog: KeyLog, set_deprotector: SetDeprotector) -> None:
        self.keylog = keylog
        self.set = set_deprotector
        self.active = False
        self._cipher = ""
        self._hash = "sha256"
        self._key_len = 0
        self._app: dict[int, bytes] = {}

    def on_server_hello(self, facts: Facts) -> str | None:
        """Install the keys of this connection; returns a problem text or None."""
        sh = facts.server_hello
        if sh is None or not facts.client_hellos:
            return None
        secrets = self.keylog.secrets(facts.client_hellos[0].random)
        if not secrets:
            return None
        params = suite_params(sh.cipher_suite)
        if params is None:
            return f"no record protection known for suite 0x{sh.cipher_suite:04x}"
        try:
            if facts.tls13:
                return self._tls13(params, secrets)
            return self._tls12(params, secrets, facts)
        except ValueError as exc:
            return f"cannot use the logged keys: {exc}"

    def _tls13(self, params: object, secrets: dict[str, bytes]) -> str | None:
        if kl.SERVER_HANDSHAKE_TRAFFIC_SECRET not in secrets:
            return "key log has no TLS 1.3 handshake traffic secrets for this connection"
        self._cipher = params.cipher  # type: ignore[attr-defined]
        self._key_len = params.key_len  # type: ignore[attr-defined]
        self._hash = tls13_hash_name(params.code)  # type: ignore[attr-defined]
        for side in (CLIENT, SERVER):
            secret = secrets.get(_HANDSHAKE[side])
            if secret is not None:
                self.set(side, self._protection(secret))
            if _APP[side] in secrets:
                self._app[side] = secrets[_APP[side]]
        self.active = True
        return None

    def _tls12(self, params: object, secrets: dict[str, bytes], facts: Facts) -> str | None:
        master = secrets.get(kl.CLIENT_RANDOM)
        sh = facts.server_hello
        if master is None or sh is None:
            return "key log has no CLIENT_RANDOM master secret for this connection"
        version = sh.selected_version
        mac_len, key_len, iv_len = params.key_material(version)  # type: ignore[attr-defined]
        block = key_block(version, params.prf_hash, master,  # type: ignore[attr-defined]
                          facts.client_hellos[0].random, sh.random, mac_len, key_len, iv_len)
        client, server = protections_from_key_block(params, block, version,  # type: ignore
                                                    sh.encrypt_then_mac)
        self.set(CLIENT, RecordDeprotector(client))
        self.set(SERVER, RecordDeprotector(server))
        self.active = True
        return None

    def _protection(self, secret: bytes) -> RecordDeprotector:
        key, iv = traffic_keys(secret, self._key_len, 12, self._hash)
        return RecordDeprotector(Tls13Protection(self._cipher, key, iv))

    def on_finished(self, direction: int) -> None:
        """TLS 1.3: that side's next records use its application traffic secret."""
        if self._cipher:
            secret = self._app.get(direction)
            self.set(direction, self._protection(secret) if secret is not None else None)

    def on_key_update(self, direction: int) -> None:
        """TLS 1.3 KeyUpdate sent by `direction`: its next records use the next secret."""
        secret = self._app.get(direction)
        if self._cipher and secret is not None:
            self._app[direction] = next_traffic_secret(secret, self._hash)
            self.set(direction, self._protection(self._app[direction]))
