"""Client simulation: which real clients can talk to a server, and what each negotiates.

A `ClientProfile` is the ClientHello bytes one real client sent, with where they came from
(`ProfileSource`: recorded here from the installed client by tools/record_clients.py, or
taken from a third-party capture, named by file and frame). The profiles ship as JSON in
tlsprobe/data/clients/ (one file each; format in docs/CLIENTS.md, read and written by
probes/clients/profiles.py).

A `ClientSimulation` is what one profile got from one server: the hello sent is the
profile's bytes with only what must be fresh made fresh (random, session id, key shares of
the same groups and lengths, GREASE values, SNI set to the target), and the answer is read as
that client would (a HelloRetryRequest answered with the same hello and the asked-for share).
Field names are part of the JSON schema: add fields, never rename them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum

from tlsprobe import registry
from tlsprobe.errors import FailureKind
from tlsprobe.model.encode import JsonObject, document, dumps, run_head

__all__ = ["CLIENTS_SCHEMA_VERSION", "ClientProfile", "ClientSimulation", "ClientsReport",
           "FailureReason", "KeyMinimums", "ProfileSource",
           "SimStatus", "SourceKind", "TrustStore"]


class SourceKind(StrEnum):
    """Where a profile's hello bytes came from."""

    recorded = "recorded"      # the installed client, run here against a local listener
    capture = "capture"        # a third-party capture file (file and frame named)


class TrustStore(StrEnum):
    """Whose root certificates the client trusts (the trust verdict is stated only where
    the store is one tlsprobe can check against)."""

    system = "system"          # the operating system's store (Debian: ca-certificates)
    mozilla = "mozilla"        # NSS's built-in roots (Firefox)
    chrome = "chrome"          # the Chrome Root Store
    java = "java"              # the JDK's cacerts
    apple = "apple"
    microsoft = "microsoft"
    android = "android"
    unknown = "unknown"


@dataclass(frozen=True)
class ProfileSource:
    """Provenance of a profile's bytes."""

    kind: SourceKind
    how: str                       # the command run, or the capture's origin (project, path)
    when: str                      # ISO date of the capture (or "unknown")
    file: str | None = None        # capture: the file, relative to its corpus
    frame: int | None = None       # capture: the frame number (1-based, as tshark counts)
    sha256: str | None = None      # capture: of the file
    identified_by: str | None = None  # capture: how the client was identified


@dataclass(frozen=True)
class KeyMinimums:
    """The smallest keys a client accepts, by rules its hello does not show (a library's
    security level, a setting): None where no such rule is known. Set only where the real
    client's rule is known (docs/CLIENTS.md "Key size rules")."""

    dh_bits: int | None = None     # a finite-field DHE prime (ServerKeyExchange): smaller
                                   # fails the handshake ("dh key too small")
    rsa_bits: int | None = None    # an RSA key in the chain the server sent: smaller is
                                   # not trusted (checked with the chain's trust)
    ecc_bits: int | None = None    # an EC key's curve in that chain, likewise
    basis: str = ""                # the rule, as the details name it


@dataclass(frozen=True)
class ClientProfile:
    """One real client's ClientHello and what is known about the client."""

    id: str                        # file name stem, e.g. "chromium-156-linux"
    client: str                    # "Chromium"
    version: str                   # "156.0.8078.73"
    platform: str                  # "Debian 12, x86_64"
    library: str | None            # the TLS library ("BoringSSL", "NSS 3.x", "OpenSSL 3.0.x")
    source: ProfileSource
    hello: bytes                   # the ClientHello handshake message (header included)
    record_version: int            # the record layer version of the record that carried it
    ja3: str                       # of `hello` as stored
    ja4: str
    ja3_stable: bool               # False where the client permutes its extensions
    trust_store: TrustStore
    notes: str = ""
    key_minimums: KeyMinimums | None = None   # None: no rule on key sizes known

    @property
    def label(self) -> str:
        return f"{self.client} {self.version} ({self.platform})"


class SimStatus(StrEnum):
    """How a simulated handshake ended."""

    connected = "connected"        # the server accepted the hello and sent its flight
    failed = "failed"              # the server refused; `reason` says why where established
    inconclusive = "inconclusive"  # nothing could be established (network, our limits)


class FailureReason(StrEnum):
    """Why a client could not connect, where the audit establishes it."""

    no_shared_version = "no shared version"
    no_shared_suite = "no shared cipher suite"
    no_shared_group = "no shared group"
    hello_too_large = "hello too large"
    version_intolerance = "version intolerance"
    certificate_not_trusted = "certificate not trusted"
    #: the server signed its key exchange with a hash the client does not offer (TLS 1.0
    #: and 1.1 sign with MD5+SHA-1 or SHA-1; a client listing no SHA-1 scheme refuses it)
    no_shared_signature = "no shared signature algorithm"
    #: the server's DHE prime is smaller than the client accepts (KeyMinimums.dh_bits)
    dh_key_too_small = "dh key too small"
    refused = "refused"            # the server refused for a reason the audit does not show


@dataclass(frozen=True)
class ClientSimulation:
    """What one client profile negotiated with one server (None: not established)."""

    profile: str                   # ClientProfile.id
    client: str                    # ClientProfile.label
    status: SimStatus
    version: int | None = None
    cipher_suite: int | None = None
    group: int | None = None       # the key exchange group (TLS 1.2 ECDHE curve included)
    dh_bits: int | None = None     # a finite-field DHE prime's size
    hello_retry: bool = False      # the group was reached through a HelloRetryRequest
    alpn: str | None = None
    signature_scheme: int | None = None
    trusted: bool | None = None    # the chain under the client's store (None: not checked)
    reason: FailureReason | None = None
    detail: str = ""               # what the verdict rests on (alert, evidence), as prose
    ja4_sent: str = ""             # JA4 of the hello actually sent
    post_quantum: bool = False     # the negotiated group is a post-quantum (hybrid) group

    def json_shape(self) -> dict[str, object]:
        """The fields, then the names of the codepoints for people (added members)."""
        shape: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        shape["version_name"] = registry.version_name(self.version) \
            if self.version is not None else None
        shape["cipher_suite_name"] = registry.suite_name(self.cipher_suite) \
            if self.cipher_suite is not None else None
        shape["group_name"] = registry.group_name(self.group) if self.group is not None else None
        shape["signature_scheme_name"] = registry.sigscheme_name(self.signature_scheme) \
            if self.signature_scheme is not None else None
        return shape


CLIENTS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ClientsReport:
    """`tlsprobe clients HOST[:PORT]`: every profile's simulation against one target, the
    server_name sent (None: none, an IP literal or --no-sni), the connections made, and an
    error when the target could not be simulated at all (every connection failed on the
    network: `error_kind` as the audit's)."""

    host: str
    port: int
    server_name: str | None = None
    address: str | None = None
    clients: tuple[ClientSimulation, ...] = ()
    connections: int = 0
    duration_s: float = 0.0
    error: str | None = None
    error_kind: FailureKind | None = None
    started_at: str | None = None   # when the simulation of this target started (UTC)

    def to_dict(self) -> JsonObject:
        return document({"schema": CLIENTS_SCHEMA_VERSION, "tool": "tlsprobe",
                         "kind": "clients", **run_head()}, self)

    def to_json(self, indent: int | None = None) -> str:
        return dumps(self.to_dict(), indent=indent)
