"""A client's key size rules (model/clients.py `KeyMinimums`), applied to what a simulated
connection got: rules its hello does not show, which the real client applies after the
ServerHello (OpenSSL's security level: "dh key too small" when it reads the
ServerKeyExchange, "EE certificate key too weak" when it verifies the chain).

  - `dh_refusal`: a finite-field DHE prime under `dh_bits` fails the handshake, whether or
    not the client verifies the certificate (checked against curl -k);
  - `weak_chain_key`: an RSA key under `rsa_bits`, or an EC key on a curve under
    `ecc_bits`, in the chain the server sent fails the chain's verification: stated where
    the trust is checked (the trust anchor a store adds is not looked at).
A profile without rules (None) gets none. Nothing here sends anything.
"""

from __future__ import annotations

from tlsprobe.model.clients import ClientProfile, FailureReason

__all__ = ["dh_refusal", "weak_chain_key"]


def dh_refusal(profile: ClientProfile, dh_bits: int | None
               ) -> tuple[FailureReason, str] | None:
    """(dh key too small, why) when the server's DHE prime is under the client's minimum."""
    rules = profile.key_minimums
    if rules is None or rules.dh_bits is None or dh_bits is None or dh_bits >= rules.dh_bits:
        return None
    return FailureReason.dh_key_too_small, (
        f"the server's DHE prime has {dh_bits} bits; this client requires at least "
        f"{rules.dh_bits}" + (f" ({rules.basis})" if rules.basis else ""))


def weak_chain_key(profile: ClientProfile, chain: tuple[bytes, ...]) -> str | None:
    """Why the client's verification refuses the chain for a key under its minimum (the
    first such certificate, the leaf first); None: no rule breached (or none to apply, or a
    certificate or key that cannot be read: the chain check says what it says of it)."""
    rules = profile.key_minimums
    if rules is None or (rules.rsa_bits is None and rules.ecc_bits is None):
        return None
    for index, der in enumerate(chain):
        found = _key_bits(der)
        if found is None:
            continue
        kind, bits = found
        least = rules.rsa_bits if kind == "RSA" else rules.ecc_bits
        if least is None or bits >= least:
            continue
        which = "the leaf" if index == 0 else f"certificate {index + 1} of the chain"
        return (f"certificate key too weak: {which} has a {bits}-bit {kind} key; this "
                f"client requires at least {least}" +
                (f" ({rules.basis})" if rules.basis else ""))
    return None


def _key_bits(der: bytes) -> tuple[str, int] | None:
    """("RSA" or "EC", the key's or curve's bits) of a certificate, as model.describe reads
    it; None for another key or one that does not load."""
    from tlsprobe.model.describe import certificate_info
    info = certificate_info(der)
    if info.key_bits is None:
        return None
    if info.rsa_key:
        return "RSA", info.key_bits
    if info.key_type.startswith("EC "):
        return "EC", info.key_bits
    return None
