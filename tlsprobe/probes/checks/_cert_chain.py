"""What the certificate checks read: the chain the server sends, and what it sends with it
(a stapled OCSP response, Signed Certificate Timestamps in a TLS extension), from ONE
connection shared by every certificate check of a target.

The audit's own certificate summary (model CertificateInfo) keeps neither the leaf's
extensions nor whether the server stapled, so the checks take a connection of their own:
the audit's versions hello of the highest version spoken (answered in the versions phase),
with status_request and signed_certificate_timestamp (RFC 6962, type 18) offered, read up to
the end of the server's first flight (TLS 1.3: decrypted, up to CertificateVerify). The
first certificate check to ask opens it (it is counted under that check, label "chain");
the others await the same answer.

Also what the chain and OCSP checks share: `issued` (one certificate signed another, by
name and signature) and `trust_anchors` (the trust store the cert phase judges against:
scan --cafile, else the system bundle).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar

from cryptography import x509
from cryptography.x509 import ocsp

from tlsprobe.engine.certtwin import readable_certificate
from tlsprobe.engine.chainpath import issued
from tlsprobe.engine.client import HandshakeFailure
from tlsprobe.engine.config import TLS13, ClientConfig
from tlsprobe.engine.interface import Handshake
from tlsprobe.errors import NetworkError
from tlsprobe.model.checks import CheckResult
from tlsprobe.model.server_certs import AUTH_OF
from tlsprobe.net.driver import Progress, adrive
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.certs import SCHEMES_OF, leaf_type, offer
from tlsprobe.probes.audit.outcome import STOP_VERIFY, Outcome, finished
from tlsprobe.probes.checks._shared import once
from tlsprobe.probes.checks._tolerance import edited_handshake, top_versions
from tlsprobe.probes.checks.base import CheckContext
from tlsprobe.probes.facts import STAPLING_NOT_REACHED, session_features_of
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.hello import ClientHello

__all__ = ["NoChain", "Served", "again", "extension", "fetch", "issued", "leaf", "leaf_in", "leaf_of",
           "of_phase", "served", "served_as", "trust_anchors"]

SCT_EXTENSION = 18
SCT_IN_OCSP = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.5")

E = TypeVar("E", bound=x509.ExtensionType)


@dataclass(frozen=True)
class Served:
    """The server's answer: negotiated version and suite, the chain (DER, leaf first),
    whether it stapled an OCSP response (None: not known, the TLS 1.2 handshake ended after
    a ServerHello that announced a CertificateStatus and before its place) and the
    s_client-like note, and how many places outside the certificate carried SCTs (the TLS
    extension, the stapled response)."""

    version: int
    cipher_suite: int
    chain: tuple[bytes, ...]
    stapled: bool | None
    stapling: str
    sct_sources: tuple[str, ...] = ()
    response: bytes | None = None   # the stapled OCSPResponse (DER), when there is one
    #: the leaf's key type (model/server_certs.py key_family), and the key type asked for
    #: when the hello selected another chain than the default one (`fetch`'s `kind`)
    key_type: str = ""
    kind: str | None = None


class NoChain(str):
    """Why no chain was had (a str, as every caller shows it); `refused`: the server refused
    the hello itself (an alert or a close before its ServerHello), not a network failure."""

    refused: bool = False


def _no_chain(text: str, refused: bool) -> NoChain:
    out = NoChain(text)
    out.refused = refused
    return out


def _with_sct(hello: ClientHello) -> ClientHello:
    return replace(hello, extensions=list(hello.extensions) + [ext.empty(SCT_EXTENSION)]) \
        if all(e.type != SCT_EXTENSION for e in hello.extensions) else hello


def _holds_scts(data: bytes) -> bool:
    """A signed_certificate_timestamp extension's SignedCertificateTimestampList (RFC 6962
    3.3) is not empty (an empty extension or list holds no SCT)."""
    return len(data) >= 2 and int.from_bytes(data[:2], "big") > 0


def _sct_sources(hs: Handshake, response: bytes | None) -> tuple[str, ...]:
    """Where outside the certificate the server sent SCTs: only lists that hold one."""
    out: list[str] = []
    sh = hs.messages.server_hello
    found = sh.extension(SCT_EXTENSION) if sh is not None else None
    if found is not None and _holds_scts(bytes(found.data)):
        out.append("the TLS extension (ServerHello)")
    cert = hs.messages.flight.certificate
    entries = cert.certificate_list if cert is not None else None
    if entries and any(e.type == SCT_EXTENSION and _holds_scts(bytes(e.data))
                       for e in entries[0].extensions):
        out.append("the TLS extension (leaf CertificateEntry)")
    if response:
        try:
            single = ocsp.load_der_ocsp_response(response).single_extensions
            if any(e.oid == SCT_IN_OCSP and not (
                    isinstance(e.value, x509.SignedCertificateTimestamps) and not e.value)
                   for e in single):
                out.append("the stapled OCSP response")
        except (ValueError, TypeError):
            pass
    return tuple(out)


def _stapled_response(hs: Handshake) -> bytes | None:
    status = hs.messages.flight.certificate_status
    if status is not None:
        return bytes(status.response) if status.response else None
    cert = hs.messages.flight.certificate
    entries = cert.certificate_list if cert is not None else None
    if entries:
        for e in entries[0].extensions:
            if e.type == 5 and len(e.data) > 4:
                return bytes(e.data[4:])
    return None


def _hello(ctx: CheckContext, kind: str | None) -> ClientConfig | str:
    """The hello of `fetch`: the audit's hello of the highest version spoken (the default
    chain), or (`kind`) the cert phase's hello that selects the `kind` certificate alone, in
    the version the cert phase read that chain in (probes/audit/certs.py `offer`; TLS 1.2:
    that authentication's suites and the key type's signature schemes)."""
    if kind is None:
        versions = top_versions(ctx)
        if not versions:
            return "no TLS version is known to be spoken (the versions phase established none)"
        return ctx.version_hello(versions[0])[0]
    read = ctx.runner.chains.get(kind)
    if read is None or read.version is None:
        return f"the cert phase read no {kind} certificate chain"
    if kind not in (SCHEMES_OF if read.version >= TLS13 else AUTH_OF):
        return f"no hello can ask for the {kind} certificate alone"
    return offer(ctx.runner, read.version, (kind,))[0]


async def fetch(ctx: CheckContext, label: str = "chain", *, without_sni: bool = False,
                kind: str | None = None) -> Served | str:
    """One connection (counted under `ctx`'s check, `label`) and the server's chain;
    `without_sni`: the same hello without the server_name extension; `kind`: the hello
    that selects the certificate of that key type (`_hello`), whose chain it must be."""
    config = _hello(ctx, kind)
    if isinstance(config, str):
        return config
    config = replace(config, status_request=True,
                     server_name=None if without_sni else config.server_name)

    async def talk(transport: AsyncTransport, deadline: float) -> Served | str:
        hs = edited_handshake(config, _with_sct, read_server_flight=True)
        try:
            await adrive(hs, transport, deadline, until=lambda h: finished(h, STOP_VERIFY),
                         progress=Progress())
        except (HandshakeFailure, NetworkError) as exc:
            if hs.messages.server_hello is None or not hs.messages.flight.certificate:
                refused = isinstance(exc, HandshakeFailure) and hs.messages.server_hello \
                    is None and exc.refused
                return _no_chain(f"no certificate could be read from the server: {exc}",
                                 refused)
        sh = hs.messages.server_hello
        cert = hs.messages.flight.certificate
        if sh is None or cert is None:
            return "the server sent no Certificate message (an anonymous suite, or the " \
                "TLS 1.3 flight could not be read)"
        chain = tuple(cert.certificates)
        if not chain:
            return "the server sent an empty certificate chain"
        response = _stapled_response(hs)
        stapling = session_features_of(hs.facts()).ocsp_stapling or "none"
        known = response is not None or stapling != STAPLING_NOT_REACHED
        return Served(sh.selected_version, sh.cipher_suite, chain,
                      response is not None if known else None, stapling, _sct_sources(hs, response), response, leaf_type(chain), kind)

    got = await ctx.converse(talk, label if kind is None else f"{label} {kind}")
    if isinstance(got, Outcome):
        return f"no connection: {got.describe()}"
    if kind is not None and isinstance(got, Served) and got.key_type != kind:
        return (f"the hello asking for the {kind} certificate alone was answered with the "
                f"{got.key_type} one")
    return got


async def again(ctx: CheckContext, got: Served, label: str, *,
                without_sni: bool = False) -> Served | str:
    """`fetch` once more for the chain `got` is (the default one, or its `kind`'s)."""
    return await fetch(ctx, label, without_sni=without_sni, kind=got.kind)


def of_phase(kind: str, read: Outcome) -> Served:
    """The `kind` chain as the cert phase's connection read it (no connection here): its
    version, suite and certificates; whether it stapled was not asked (`stapled` False,
    read by no check that is given one)."""
    return Served(read.version or 0, read.cipher_suite or 0, read.certificates, False,
                  "not asked", key_type=kind, kind=kind)


async def served_as(ctx: CheckContext, kind: str) -> Served | str:
    """The `kind` chain and its stapling from a connection of its own (`fetch`), one per
    target and key type, whichever certificate check asks first."""
    async def make(c: CheckContext) -> Served | str:
        return await fetch(c, "chain", kind=kind)
    return await once(ctx, f"chain {kind}", make)


async def served(ctx: CheckContext) -> Served | str:
    """The server's chain and stapling (one connection per target, whichever certificate
    check asks first), or why it could not be had."""
    return await once(ctx, "chain", fetch)


def leaf_of(got: Served) -> x509.Certificate | str:
    """The leaf certificate parsed, or why it does not parse."""
    try:
        return readable_certificate(got.chain[0])
    except ValueError as exc:
        return f"the leaf certificate does not parse: {exc}"


def extension(leaf: x509.Certificate, kind: type[E], name: str) -> E | None | str:
    """The leaf's `kind` extension (None: absent; a str when it, `name` for people, or the
    leaf's extensions do not parse)."""
    try:
        return leaf.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None
    except (x509.DuplicateExtension, ValueError, TypeError) as exc:   # one extension twice, say
        return f"the {name} extension does not parse ({exc})"


async def leaf(ctx: CheckContext) -> tuple[Served, x509.Certificate] | CheckResult:
    """What a certificate check judges: the shared chain (`served`) and its parsed leaf; or
    the result to return: inconclusive, with the reason, when either cannot be had."""
    got = await served(ctx)
    if isinstance(got, str):
        return ctx.inconclusive(got)
    parsed = leaf_of(got)
    if isinstance(parsed, str):
        return ctx.inconclusive(parsed)
    return got, parsed


def leaf_in(ctx: CheckContext, got: Served) -> x509.Certificate | CheckResult:
    """`got`'s parsed leaf, or the result to return (inconclusive) when it does not parse."""
    parsed = leaf_of(got)
    return ctx.inconclusive(parsed) if isinstance(parsed, str) else parsed


def trust_anchors(ctx: CheckContext) -> tuple[tuple[x509.Certificate, ...] | None, str | None, str]:
    """The trust store's certificates (None: none could be read), its path, and why not."""
    from tlsprobe.engine.truststore import default_cafile, load_trust_store
    from tlsprobe.files import UnreadableFile
    path = ctx.runner.cafile or default_cafile()
    if path is None:
        return None, None, "no trust store found (use --cafile)"
    try:
        return load_trust_store(path), path, ""
    except (OSError, ValueError, UnreadableFile) as exc:
        return None, path, f"cannot read the trust store: {exc}"
