"""Rules a capture's handshake is judged by without keys: the live probe's rule of a
ServerHello's choice (engine.serverhello.choice_problem) applied to the hello summaries,
with what else a ServerHello settles (`server_hello_choices`, remembered per pair of hello
shapes by offline.facts), and
the AEAD tag length that tells an encrypted TLS 1.3 alert by its size
(Facts.first_protected). Per connection: a few dict lookups at the ServerHello and at the
client's first protected record; the engine's modules are imported once, when first needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tlsprobe import registry
from tlsprobe.wire.context import is_tls13_version
from tlsprobe.wire.hello_fields import ClientHelloInfo, ServerHelloInfo

EARLY_DATA: Final = 42
SUPPORTED_VERSIONS: Final = 43
_DTLS_AS_TLS: Final = {0xFEFF: 0x0302, 0x0100: 0x0302, 0xFEFD: 0x0303, 0xFEFC: 0x0304}
_TAGS: Final[dict[int, int | None]] = {}
_RULE: Final[list[Callable[..., str | None]]] = []
#: what a ServerHello says against its ClientHello (`server_hello_choices`): the problems
#: to report, HRR, version, suite, TLS 1.3, key exchange, its key share's group
Choices = tuple[tuple[str, ...], bool, int, int, bool, str | None, int | None]


def server_hello_choices(info: ServerHelloInfo, hello: ClientHelloInfo | None,
                         dtls: bool) -> Choices:
    """What a ServerHello (or HRR) tells against the ClientHello it answers (`hello`, the
    last one; None: not seen): the problems to report, whether it is an HRR, version,
    suite, TLS 1.3, key exchange and its key share's group. A function of the two hellos'
    fields but their randoms and session ids, so that offline.facts can remember it by
    their shapes."""
    problems = [f"malformed {name} extension in the ServerHello" + (
        " (the version it chose is not known)" if name == "supported_versions" else "")
        for name in info.problems]
    if hello is not None:
        problem = choice_problem(info, hello, dtls)
        if problem is not None:
            problems.append(problem)
    tls13 = is_tls13_version(_DTLS_AS_TLS.get(info.selected_version)
                             if dtls else info.selected_version) \
        or not dtls and _selects_later_version(info)
    suite = registry.cipher_suite(info.cipher_suite)
    return (tuple(problems), info.is_hello_retry_request, info.selected_version,
            info.cipher_suite, tls13, "TLS13" if tls13 else (suite.kx if suite else None),
            info.key_share[0] if info.key_share is not None else None)




def choice_problem(sh: ServerHelloInfo, hello: ClientHelloInfo, dtls: bool) -> str | None:
    """The live probe's verdict on a ServerHello's (or HelloRetryRequest's) choice against
    the ClientHello it answers: a suite not offered or not defined for the version chosen,
    named as the probe names it (a protocol violation with its RFC rule), else None. Judged
    only against a whole ClientHello and for a version it offered (a version not offered is
    another matter); the compression method is reported on its own
    (ConnectionReport.compression). TLS 1.3 chosen in the legacy version field is a
    pre-RFC draft's (its suites were TLS 1.2's until draft 16): not judged by RFC 8446."""
    if hello.partial or hello.sslv2 or "supported_versions" in sh.problems or \
            "supported_versions" in hello.problems:
        return None
    version = 0x0304 if sh.is_hello_retry_request else sh.selected_version
    if dtls:
        version = _DTLS_AS_TLS.get(version, version)
        offered = tuple(_DTLS_AS_TLS.get(v, v) for v in hello.supported_versions)
        legacy = _DTLS_AS_TLS.get(hello.legacy_version, hello.legacy_version)
    else:
        offered, legacy = hello.supported_versions, hello.legacy_version
    if version >= 0x0304 and not sh.is_hello_retry_request and \
            SUPPORTED_VERSIONS not in sh.extensions:
        return None  # a TLS 1.3 draft's legacy version field (draft 14 took TLS 1.2 suites)
    if not (version in offered if SUPPORTED_VERSIONS in hello.extensions
            else 0x0300 <= version <= legacy):
        return None
    if not _RULE:
        from tlsprobe.engine.serverhello import choice_problem as rule
        _RULE.append(rule)
    return _RULE[0](version, sh.is_hello_retry_request, sh.cipher_suite,
                    sh.compression_method, hello.cipher_suites, (sh.compression_method,))


def tag_length(suite: int | None) -> int | None:
    """The AEAD tag length of a TLS 1.3 cipher suite (None: not known)."""
    if suite is None:
        return None
    tag = _TAGS.get(suite, -1)
    if tag == -1:
        from tlsprobe.engine.suites import protection_params
        params = protection_params(suite)
        tag = params.cipher_params.tag_len if params is not None and params.aead else None
        if len(_TAGS) < 1024:  # (suite codes are 16 bits: bounded whatever a capture holds)
            _TAGS[suite] = tag
    return tag


def _selects_later_version(info: ServerHelloInfo) -> bool:
    """A version above TLS 1.3 chosen in supported_versions: a TLS 1.3 variant (a vendor
    experiment such as Google's 0x7eXX) whatever its number. Servers that negotiate a
    version before TLS 1.3 must not send that extension (RFC 8446 4.2.1), so the choice
    made there is TLS 1.3's key_share handshake. GREASE values are not versions."""
    v = info.selected_version
    return v > 0x0304 and 43 in info.extensions and not registry.is_grease(v)
