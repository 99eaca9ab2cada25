"""The cert phase of an audit: the server's default certificate chain, the chains it
presents for other key types (an RSA and an ECDSA certificate), and each one's trust check.

Every chain is one a connection of the audit carried, never inferred: the default one is the
first chain any connection got (as before); the others are those whose leaf has another key
type. The signature-scheme phase reads one chain per TLS 1.2 certificate (each elimination
offers the suites of one authentication) and per TLS 1.3 leaf, so with it the search costs
nothing more. Without it (or when it did not finish), the search asks in TLS 1.2 (TLS 1.3 on
a server without TLS 1.2): one hello offering only what the key types not yet seen can
answer (TLS 1.2: their (EC)DHE suites; TLS 1.3: their signature schemes), repeated while the
server answers with a new one: one connection on a server with one certificate.
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
from tlsprobe.model.server_certs import AUTH_OF, key_family
from tlsprobe.model.vocab import SigalgStatus, TrustStatus
from tlsprobe.probes.audit.groups import candidate_groups
from tlsprobe.probes.audit.scheduler import (
    STOP_FLIGHT,
    STOP_VERIFY,
    Outcome,
    TargetRunner,
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
    """Whether the signature-scheme phase already saw every certificate of `version`:
    its elimination of `version` established (TLS 1.2: each authentication's suites
    offered until the server refused the rest)."""
    audit = next((s for s in report.signature_schemes if s.version.id == version), None)
    return audit is not None and audit.status == SigalgStatus.ESTABLISHED


def _offer(runner: TargetRunner, version: int, missing: tuple[str, ...]
           ) -> tuple[ClientConfig, str]:
    """The hello asking for a certificate of the `missing` key types only, and its words."""
    if version == TLS13:
        schemes = tuple(c for t in missing for c in SCHEMES_OF[t])
        config = runner.config((TLS13,), groups=tuple(candidate_groups(TLS13)),
                               key_share_groups=COMMON_SHARES, signature_algorithms=schemes,
                               cipher_suites_13=tuple(registry.suites_for_version(TLS13)))
        return config, "signature schemes of " + ", ".join(missing) + " keys only"
    auths = tuple(dict.fromkeys(AUTH_OF[t] for t in missing))
    config = runner.config((version,), groups=tuple(candidate_groups(TLS12)),
                           cipher_suites_12=pfs_suites(auths, version))
    return config, suites_text(auths) + " only"


def _served(o: Outcome) -> str:
    """The key type an answer's certificate serves, for the search only (which key types
    to ask for next): its leaf's; for a leaf whose key cannot be read, the key type its
    TLS 1.3 signature scheme or TLS 1.2 suite needs (a report names no key type so)."""
    kind = leaf_type(o.certificates)
    if kind != "unknown":
        return kind
    by_scheme = next((t for t, codes in SCHEMES_OF.items() if o.signature_scheme in codes), None)
    auth = suite_auth(o.cipher_suite)
    return by_scheme or next((t for t, a in AUTH_OF.items() if a == auth), kind)


def _missing(version: int, seen: set[str]) -> tuple[str, ...]:
    """The key types a further hello of `version` can still ask for."""
    if version == TLS13:
        return tuple(t for t in SCHEMES_OF if t not in seen)
    served = {AUTH_OF.get(t) for t in seen}
    return tuple(next(t for t, a in AUTH_OF.items() if a == auth)
                 for auth in AUTH_CLASSES if auth not in served)


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
    while missing := _missing(version, seen):
        config, offer = _offer(runner, version, missing)
        out = await runner.run(config, PHASE, STOP_VERIFY if version == TLS13 else STOP_FLIGHT)
        if out.refused:
            return found, None
        if not out.certificates:
            why = out.reason or "no Certificate message" if out.answered else out.describe()
            return found, f"{name} hello with {offer}: {why}"
        kind = _served(out)
        if kind in seen:
            return found, (f"{name} hello with {offer} was answered with the {kind} "
                           "certificate again")
        seen.add(kind)
        found[kind] = (out, f"{name}, {offer}")
    return found, None


def other_certificates(outcomes: list[Outcome], found: dict[str, tuple[Outcome, str]],
                       verify: TrustArgs | None) -> tuple[ServerCertificate, ...]:
    """The chains of the key types other than the default one's, each with its trust
    check (`verify` None: --no-verify)."""
    known = chains_by_type(outcomes + [o for o, _ in found.values()])
    out: list[ServerCertificate] = []
    for kind, o in list(known.items())[1:]:
        offer = found[kind][1] if kind in found else _offer_words(o)
        out.append(_described(kind, o, offer, verify))
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
