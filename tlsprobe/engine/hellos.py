"""The client's answers to a ServerHello and a HelloRetryRequest.

`ServerHellos` (the base of engine.client.ClientHandshake) applies engine.serverhello's
rules to each hello before taking it for the server's answer (a broken one is the
handshake's `hello_violation`), computes the TLS 1.3 shared secret and starts the version's
half (engine.tls13 / engine.tls12), or after a HelloRetryRequest sends the second
ClientHello: built from the config, or by the caller's `RetryHello` for a hello it built
(client simulation). In `names_only` mode (the group audit) a HelloRetryRequest is the
answer and nothing is computed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tlsprobe import kex, registry
from tlsprobe.engine import extcheck, serverhello
from tlsprobe.engine.applying import AppliedState
from tlsprobe.engine.common import (
    ILLEGAL_PARAMETER,
    TLS12,
    HandshakeFailure,
    is_tls13,
)
from tlsprobe.engine.config import BuiltHello, build_client_hello
from tlsprobe.engine.keyschedule import tls13_hash_name
from tlsprobe.engine.suites import suite_params
from tlsprobe.engine.tls12 import Tls12Client
from tlsprobe.engine.tls13 import Tls13Client
from tlsprobe.engine.verdict import Refusal
from tlsprobe.errors import FailureKind
from tlsprobe.registry import HandshakeType
from tlsprobe.wire.handshake import frame
from tlsprobe.wire.hello import ServerHello

#: builds the ClientHello answering a HelloRetryRequest from the group it asks for (None:
#: it asks for a cookie only) and its cookie: a caller that sent a `prebuilt` first hello
#: (client simulation: a real client's hello) builds the second one by the same client's
#: rules; without it the engine builds it from its ClientConfig
RetryHello = Callable[[int | None, bytes | None], BuiltHello]
_T = TypeVar("_T")


class ServerHellos(AppliedState):
    """The handshake's answers to the server's hellos."""

    #: builds the second hello after a HelloRetryRequest (None: from the config; set by
    #: ClientHandshake)
    _retry: RetryHello | None

    def _on_server_hello(self, sh: ServerHello, raw: bytes) -> None:
        # decoded before anything reads them (the ServerHello and TLS 1.2 contexts decode
        # alike); the rules come once the version is known
        extcheck.decode_extensions(sh.extensions, extcheck.HRR if sh.is_hello_retry_request
                                   else extcheck.SH13)
        self._hello_rules(lambda: serverhello.check_choice(sh, self._hellos[-1],
                                                           self._config.versions))
        serverhello.second_hello(sh, self._server_hello, self._hrr)
        if sh.is_hello_retry_request:
            self._hello_retry(sh, raw)
            return
        if sh.selected_version not in self._config.versions:
            self._server_hello = sh  # the server's answer: a version the client did not offer
            serverhello.check_offered_version(sh, self._config, self._hellos[-1])
        self._hello_rules(lambda: serverhello.check_server_hello(
            sh, self._config, self._hellos[-1], self._hrr))
        found = self._hello_rules(lambda: serverhello.tls13_share(
            sh, self._hrr, self._hellos[-1], self._shares)) \
            if is_tls13(sh.selected_version) else None
        self._server_hello = sh
        self._transcript.add(raw)
        if found is not None:
            self._record_version = TLS12  # legacy_record_version from now on
            self._tls13_server_hello(sh, found)
        else:
            self._record_version = sh.selected_version
            self._start_half(Tls12Client(self._context(sh), self._config.resume))

    def _hello_rules(self, rules: Callable[[], _T]) -> _T:
        """Apply the rules of a ServerHello or HelloRetryRequest before the client takes it
        for the server's answer: a broken one is the hello's named violation
        (`hello_violation`), and that hello is no answer (server_hello and hrr stay None)."""
        try:
            return rules()
        except Refusal as refusal:
            self._hello_violation = refusal.message
            raise

    def _tls13_server_hello(self, sh: ServerHello,
                            found: tuple[int, kex.KeyShare, bytes] | str) -> None:
        if isinstance(found, str):
            self._stop_incomplete(found)  # we offered a share we cannot compute
            return
        group, mine, key = found
        try:
            self._shared_secret = mine.shared_secret(key)
        except kex.InvalidShare as exc:
            self._share_problem = str(exc)
            self._fail(ILLEGAL_PARAMETER, f"invalid server key share for "
                      f"{registry.group_label(group)}: {exc}")
        self._first_flight_done = True
        if self._stop_after_first_flight and not self._read_server_flight:
            self._done = True
            return
        if suite_params(sh.cipher_suite) is None:
            self._stop_incomplete(f"no record protection for "
                                 f"{registry.suite_label(sh.cipher_suite)}")
            return
        self._start_half(Tls13Client(self._context(sh), self._shared_secret,
                                     self._config.psk_offer))

    def _hello_retry(self, hrr: ServerHello, raw: bytes) -> None:
        def rules() -> None:
            serverhello.check_hello_retry_form(hrr, self._config, self._hellos[-1])
            serverhello.check_hello_retry_change(hrr, self._config, self._shares)
        self._hello_rules(rules)
        self._hrr = hrr
        if self._config.psk_offer is not None:
            self._stop_incomplete("a HelloRetryRequest to a PSK offer (a second hello with "
                                 "the PSK is not implemented)")
            return
        if self._built is None:
            raise HandshakeFailure(FailureKind.PROTOCOL, "HelloRetryRequest before start()")
        if self._names_only:   # the HelloRetryRequest is the answer: nothing is computed
            self._done = True
            return
        group = hrr.hrr_selected_group
        cookie_ext = hrr.extension(44)
        cookie = None
        if cookie_ext is not None:
            from tlsprobe.wire.ext_decoders import WHERE_HRR, decode_extension
            cookie = decode_extension(44, cookie_ext.data, WHERE_HRR)
        self._transcript.apply_hello_retry(tls13_hash_name(hrr.cipher_suite))
        self._transcript.add(raw)
        share_groups = (group,) if group is not None else self._config.share_groups()
        first = self._built.hello
        rebuilt = self._retry(group, cookie) if self._retry is not None else \
            build_client_hello(self._config, share_groups=share_groups,
                               session_id=first.legacy_session_id, cookie=cookie,
                               random=first.random, reuse=self._shares)
        self._shares = dict(rebuilt.shares)
        self._hellos.append(rebuilt.hello)
        self._record_version = TLS12
        self._send_message(frame(HandshakeType.client_hello, rebuilt.hello.serialize()))


__all__ = ["RetryHello", "ServerHellos"]
