"""The cert phase of an audit: the server's default certificate chain, the chains it
presents for other key types (an RSA and an ECDSA certificate), and each one's trust check.

Every chain is one a connection of the audit carried, never inferred: the default one is the
first chain any connection got (as before); the others are those whose leaf has another key
type. The signature-scheme phase reads one chain per TLS 1.2 certificate (each elimination
offers the suites of one authentication) and per TLS 1.3 leaf, so with it the search costs
nothing more. Without it (or when it did not finish), the search asks in TLS 1.2 (TLS 1.3 on
a server without TLS 1.2): one hello offering only what the key types not yet seen can
answer (their signature schemes, which tell apart the key types one TLS 1.2 suite serves:
RSA and RSA-PSS, ECDSA, Ed25519 and Ed448; TLS 1.2: with their (EC)DHE suites), repeated
while the server answers with a new one. TLS 1.2 asks apart for the key types of the
authentications no certificate seen serves (one hello) and for each authentication a seen one
serves (one hello: its other key types): two connections on a server with one certificate
(TLS 1.3: one). A server answering with a certificate the schemes excluded does not choose by
them: the key types asked are then not established (said, never "no other certificate").
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import TLS12, TLS13, ClientConfig
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.probe import (
    CertificateInfo,
    Codepoint,
    ServerCertificate,
    TrustCheck,
)
from tlsprobe.model.server_certs import AUTH_OF, key_family, scheme_key_type
from tlsprobe.model.vocab import SigalgStatus, TrustStatus
from tlsprobe.probes.audit.groups import candidate_groups
from tlsprobe.probes.audit.scheduler import (
    STOP_FLIGHT,
    STOP_VERIFY,
    Outcome,
    TargetRunner,
    broad_sigalgs,
)
from tlsprobe.probes.audit.sigalgs import (
    AUTH_CLASSES,
    COMMON_SHARES,
    pfs_suites,
    suite_auth,
    suites_text,
)

PHASE = "certificate key types"
TrustArgs = tuple[str, str | None]   # (host name, trust store): a chain's trust check
#: TLS 1.3: the signature schemes a certificate of each key type signs with
SCHEMES_OF = {"RSA": (0x0804, 0x0805, 0x0806, 0x0401, 0x0501, 0x0601),
              "ECDSA": (0x0403, 0x0503, 0x0603, 0x081A, 0x081B, 0x081C),
              "Ed25519": (0x0807,), "Ed448": (0x0808,), "RSA-PSS": (0x0809, 0x080A, 0x080B)}

def leaf_type(chain: tuple[bytes, ...]) -> str:
    """The key type of a chain's leaf (model/server_certs.py key_family)."""
    from tlsprobe.model.describe import certificate_info
    return key_family(certificate_info(chain[0])) if chain else "unknown"


def chains_by_type(outcomes: list[Outcome]) -> dict[str, Outcome]:
    """An outcome carrying a chain of each leaf key type: first the default chain's (the
    first chain met), then each other type's, read in the default chain's version when a
    connection of that version carried one (else the first met): the same report whichever
    phase finished first."""
    with_chain = [o for o in outcomes if o.certificates]
    if not with_chain:
        return {}
    default = with_chain[0]
    ranked = [default] + sorted(with_chain[1:], key=lambda o: o.version != default.version)
    out: dict[str, Outcome] = {}
    for o in ranked:
        out.setdefault(leaf_type(o.certificates), o)
    return out


def _searched(report: AuditReport, version: int) -> bool:
    """Whether the signature-scheme phase already saw every certificate of `version`: its
    elimination of `version` established (TLS 1.2: each authentication's suites offered
    until the server refused the rest, each certificate's schemes with no gap, so that the
    server met every certificate its suites serve)."""
    audit = next((s for s in report.signature_schemes if s.version.id == version), None)
    return audit is not None and audit.status == SigalgStatus.ESTABLISHED and all(
        k.status == SigalgStatus.ESTABLISHED and not k.reason for k in audit.by_key_type)


def offer(runner: TargetRunner, version: int, missing: tuple[str, ...]
           ) -> tuple[ClientConfig, str]:
    """The hello asking for a certificate of the `missing` key types only, and its words:
    their signature schemes (which tell apart the key types one suite serves: RSA and
    RSA-PSS; ECDSA, Ed25519 and Ed448), in TLS 1.2 with their (EC)DHE suites."""
    kinds = ", ".join(missing[:-1]) + " and " + missing[-1] if len(missing) > 1 else missing[0]
    words = f"signature schemes of {kinds} keys only"
    if version == TLS13:
        schemes = tuple(c for t in missing for c in SCHEMES_OF[t])
        config = runner.config((TLS13,), groups=tuple(candidate_groups(TLS13)),
                               key_share_groups=COMMON_SHARES, signature_algorithms=schemes,
                               cipher_suites_13=tuple(registry.suites_for_version(TLS13)))
        return config, words
    auths = tuple(a for a in AUTH_CLASSES if a in {AUTH_OF[t] for t in missing})
    schemes = tuple(c for c in broad_sigalgs() if scheme_key_type(c) in missing)
    config = runner.config((version,), groups=tuple(candidate_groups(TLS12)),
                           signature_algorithms=schemes,
                           cipher_suites_12=pfs_suites(auths, version))
    return config, f"{suites_text(auths)}, {words}"


def _served(o: Outcome) -> str:
    """The key type an answer's certificate serves, for the search only (which key types
    to ask for next): its leaf's; for a leaf whose key cannot be read, the key type its
    signature scheme (else its TLS 1.2 suite) needs (a report names no key type so)."""
    kind = leaf_type(o.certificates)
    if kind != "unknown":
        return kind
    by_scheme = scheme_key_type(o.signature_scheme) if o.signature_scheme is not None else None
    auth = suite_auth(o.cipher_suite)
    return by_scheme or next((t for t, a in AUTH_OF.items() if a == auth), kind)


def _ask(version: int, seen: set[str], done: set[str]) -> tuple[str, ...]:
    """The key types the next hello of `version` asks for (none: the search is over). TLS
    1.3: every one not yet seen. TLS 1.2: those of the authentications of which no
    certificate was seen, together; else those of one authentication a seen certificate
    serves too, alone: a server choosing a suite whose certificate cannot sign with the
    schemes offered refuses the hello (OpenSSL) rather than try the next suite."""
    if version == TLS13:
        return tuple(t for t in SCHEMES_OF if t not in seen | done)
    missing = [t for t in AUTH_OF if t not in seen | done]
    used = {AUTH_OF[t] for t in seen}
    fresh = tuple(t for t in missing if AUTH_OF[t] not in used)
    return fresh or tuple(t for t in missing if AUTH_OF[t] == AUTH_OF[missing[0]]) \
        if missing else ()


async def search(runner: TargetRunner, report: AuditReport, outcomes: list[Outcome],
                 spoken: set[int]) -> tuple[dict[str, tuple[Outcome, str]], str | None]:
    """The connections of the search (module text): {key type: (outcome, offer)} of the
    chains it found, and why it is not complete (None: complete)."""
    version = TLS12 if TLS12 in spoken else TLS13 if TLS13 in spoken else max(spoken)
    if _searched(report, version):
        return {}, None
    seen = {_served(o) for o in outcomes if o.certificates}
    found: dict[str, tuple[Outcome, str]] = {}
    name = registry.version_name(version)
    untold: list[str] = []
    done: set[str] = set()   # refused, or not to be told apart
    while asked := _ask(version, seen, done):
        config, offer_text = offer(runner, version, asked)
        out = await runner.run(config, PHASE, STOP_VERIFY if version == TLS13 else STOP_FLIGHT)
        if out.refused:
            done.update(asked)
            continue
        if not out.certificates:
            why = out.reason or "no Certificate message" if out.answered else out.describe()
            return found, "; ".join([*untold, f"{name} hello with {offer_text}: {why}"])
        kind = _served(out)
        if kind not in seen:
            seen.add(kind)
            found[kind] = (out, f"{name}, {offer_text}")
            continue
        # the server chose a certificate the schemes offered excluded: it does not choose by
        # them, so the key types asked for cannot be told apart from it
        untold.append(f"{name} hello with {offer_text} was answered with the {kind} certificate "
                      f"again: whether the server has {' or '.join(asked)} certificates is "
                      "not established")
        done.update(asked)
    return found, "; ".join(untold) or None


def other_certificates(outcomes: list[Outcome], found: dict[str, tuple[Outcome, str]],
                       verify: TrustArgs | None) -> tuple[ServerCertificate, ...]:
    """The chains of the key types other than the default one's, each with its trust
    check (`verify` None: --no-verify)."""
    known = chains_by_type(outcomes + [o for o, _ in found.values()])
    out: list[ServerCertificate] = []
    for kind, o in list(known.items())[1:]:
        words = found[kind][1] if kind in found else _offer_words(o)
        out.append(_described(kind, o, words, verify))
    return tuple(out)


def _offer_words(o: Outcome) -> str:
    """What the hello of a chain read by another phase offered, in its words."""
    name = registry.version_name(o.version) if o.version else "?"
    if o.version == TLS13 and o.signature_scheme is not None:
        return f"{name}, signed with {registry.sigscheme_label(o.signature_scheme)}"
    auth = suite_auth(o.cipher_suite)
    return f"{name}, {suites_text((auth,))}" if auth in AUTH_CLASSES else name


def _described(kind: str, o: Outcome, offer: str, verify: TrustArgs | None) -> ServerCertificate:
    trust = trust_check(list(o.certificates), *verify) if verify is not None else \
        TrustCheck(TrustStatus.NOT_CHECKED, detail="skipped (--no-verify)")
    return ServerCertificate(kind, Codepoint.version(o.version or 0), offer,
                             describe(o.certificates), trust)


def describe(chain: tuple[bytes, ...]) -> tuple[CertificateInfo, ...]:
    """A chain described (the X.509 reader imported only when there is one)."""
    if not chain:
        return ()
    from tlsprobe.probes.facts import certificate_info
    return tuple(certificate_info(der) for der in chain)


def trust_check(chain: list[bytes], hostname: str, cafile: str | None) -> TrustCheck:
    """The chain (leaf first) checked against `cafile` (else the system bundle) and
    `hostname`, with tlsprobe.engine.chain like `tlsprobe probe`; a value, never raises."""
    from tlsprobe.engine.chain import REASONS, verify_with_store
    path, result = verify_with_store(chain, hostname, cafile)
    if isinstance(result, str):
        return TrustCheck(TrustStatus.NOT_CHECKED, detail=result, hostname=hostname, trust_store=path)
    if not result.established:   # OpenSSL's verdict not known: no code, not "untrusted"
        return TrustCheck(TrustStatus.NOT_CHECKED, detail=result.detail or "", hostname=hostname,
                          hostname_ok=result.hostname_ok, trust_store=path)
    return TrustCheck(TrustStatus.TRUSTED if result.ok else TrustStatus.UNTRUSTED, result.code,
                      REASONS.get(result.code, result.reason), result.detail or "", hostname,
                      result.hostname_ok, path)
