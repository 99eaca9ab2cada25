"""TLS 1.2 (and 1.0/1.1) RSA key transport: the client's encrypted pre_master_secret.

RFC 5246 section 7.4.7.1: the pre_master_secret is client_version (the version offered in
the ClientHello, not the negotiated one) followed by 46 random bytes, encrypted with
RSAES-PKCS1-v1_5 to the key in the server's certificate. The wire layer adds the 2-byte
length prefix (absent in SSL 3.0).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric import padding, rsa

from .base import InvalidShare

if TYPE_CHECKING:
    from cryptography import x509


def rsa_encrypt_premaster(public_key: rsa.RSAPublicKey | x509.Certificate,
                          client_version: int) -> tuple[bytes, bytes]:
    """Return (pre_master_secret, EncryptedPreMasterSecret) for the server's RSA key.

    `public_key` may be the server's certificate. A non-RSA key is the server's fault
    (an RSA suite with an ECDSA certificate) and raises `InvalidShare`."""
    # cryptography's X.509 module (with the email and ASN.1 helpers it loads) is imported
    # when an RSA key exchange happens, not by every `import tlsprobe.kex` (scan's start-up)
    from cryptography import x509
    from cryptography.x509.oid import PublicKeyAlgorithmOID
    if isinstance(public_key, x509.Certificate):
        if public_key.public_key_algorithm_oid == PublicKeyAlgorithmOID.DSA:
            # not loaded: cryptography 51 warns on every DSA key it loads
            raise InvalidShare("RSA key exchange needs an RSA key, the server's is DSA")
        loaded: object = public_key.public_key()
    else:
        loaded = public_key
    if not isinstance(loaded, rsa.RSAPublicKey):
        raise InvalidShare(f"RSA key exchange needs an RSA key, the server's is "
                           f"{type(loaded).__name__}")
    public_key = loaded
    if not 0 <= client_version <= 0xFFFF:
        raise ValueError(f"client_version 0x{client_version:x} is not a 16-bit value")
    premaster = client_version.to_bytes(2, "big") + os.urandom(46)
    try:
        encrypted = public_key.encrypt(premaster, padding.PKCS1v15())
    except ValueError as exc:  # modulus too small to hold 48 bytes with padding
        raise InvalidShare(f"RSA key of {public_key.key_size} bits cannot carry the "
                           f"pre_master_secret ({exc})") from None
    return premaster, encrypted
