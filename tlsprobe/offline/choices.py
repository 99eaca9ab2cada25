"""Rules a capture's handshake is judged by without keys: the live probe's rule of a
ServerHello's choice (engine.serverhello.choice_problem) applied to the hello summaries, and
the AEAD tag length that tells an encrypted TLS 1.3 alert by its size
(Facts.first_protected). Per connection: a few dict lookups at the ServerHello and at the
client's first protected record; the engine's modules are imported once, when first needed.
"""

from __future__ import annotations

from collections.abc import Callable

from tlsprobe.wire.hello_fields import ClientHelloInfo, ServerHelloInfo

EARLY_DATA = 42
SUPPORTED_VERSIONS = 43
_DTLS_AS_TLS = {0xFEFF: 0x0302, 0x0100: 0x0302, 0xFEFD: 0x0303, 0xFEFC: 0x0304}
_TAGS: dict[int, int | None] = {}
_RULE: list[Callable[..., str | None]] = []


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
