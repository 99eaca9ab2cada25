"""The trust store: `--cafile` (a PEM bundle or one DER certificate, a pipe included) or the
system bundle, read once per file version and bounded in size; `check_cafile` tells a
usage error before any connection. engine/chain.py verifies chains against it.
"""

from __future__ import annotations

import base64
import os
import stat
import warnings
from functools import lru_cache

from cryptography import x509

from tlsprobe.engine.certtwin import parsed_twin
from tlsprobe.errors import UsageError, os_error_text
from tlsprobe.files import UnreadableFile, read_bounded
from tlsprobe.model.pubkey import load_certificate
from tlsprobe.wire.spki import has_certificate_shape

__all__ = ["MAX_TRUST_STORE", "SYSTEM_CAFILES", "check_cafile",
           "default_cafile", "load_trust_store", "unparsed_certificates"]

SYSTEM_CAFILES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                  "/etc/ssl/cert.pem")

def default_cafile() -> str | None:
    """The system trust bundle, when there is one."""
    return next((p for p in SYSTEM_CAFILES if os.path.isfile(p)), None)


#: the largest trust store read (the system bundle is about 220 kB): more is no trust store,
#: and a device such as /dev/zero must not be read without end
MAX_TRUST_STORE = 64 * 1024 * 1024


@lru_cache(maxsize=8)
def _load(path: str, stamp: tuple[float, int, int]
          ) -> tuple[tuple[x509.Certificate, ...], tuple[bytes, ...]]:
    """The certificates of `path`, and how many others it holds that `cryptography` cannot
    parse but that have a certificate's outline (BER OpenSSL reads: wire/spki.py); `stamp`
    (mtime, inode, device) tells a changed file, and a pipe (`--cafile <(cat a.pem b.pem)`,
    which can be read once) by its inode alone. UnreadableFile when it cannot be read."""
    data = read_bounded(path, MAX_TRUST_STORE, "a trust store")
    certs: list[x509.Certificate] = []
    unparsed: list[bytes] = []
    marker = b"-----BEGIN CERTIFICATE-----"
    for block in data.split(marker)[1:]:  # one bad certificate must not hide the others
        try:
            with warnings.catch_warnings():  # e.g. a negative serial in a system root
                warnings.simplefilter("ignore")
                certs.extend(x509.load_pem_x509_certificates(marker + block))
        except (ValueError, x509.InvalidVersion):   # (OpenSSL reads v2, v4+: the twin too)
            _twin_or_unparsed(_pem_outlined(block), certs, unparsed)
            continue
    if not certs and data and marker not in data:
        try:
            certs.append(load_certificate(data))
        except ValueError:
            _twin_or_unparsed([data] if has_certificate_shape(data) else [], certs, unparsed)
    return tuple(certs), tuple(unparsed)


def _twin_or_unparsed(ders: list[bytes], certs: list[x509.Certificate],
                      unparsed: list[bytes]) -> None:
    """Each of `ders` (refused by cryptography) read through its twin in DER when it is
    refused only for BER lengths or critical flags OpenSSL reads (certtwin.parsed_twin:
    its signature checked over the bytes as sent), else kept as unparsed."""
    for der in ders:
        twin = parsed_twin(der, pinned=True, odd_times=True)
        if twin is None:
            unparsed.append(der)
        else:
            certs.append(twin)


def _pem_outlined(block: bytes) -> list[bytes]:
    """The PEM certificate after its BEGIN line, when it has a certificate's outline."""
    end = block.find(b"-----END CERTIFICATE-----")
    try:
        der = base64.b64decode(b"".join(block[:end].split()), validate=True)
    except ValueError:   # (binascii.Error)
        return []
    return [der] if end >= 0 and has_certificate_shape(der) else []


def _read(path: str) -> tuple[tuple[x509.Certificate, ...], tuple[bytes, ...]]:
    st = os.stat(path)
    return _load(path, (st.st_mtime if stat.S_ISREG(st.st_mode) else 0.0, st.st_ino,
                        st.st_dev))


def load_trust_store(path: str | os.PathLike[str]) -> tuple[x509.Certificate, ...]:
    """Every certificate in a PEM bundle (or one DER file). ValueError when none is there;
    UnreadableFile (its `reason` without the path) when the file cannot be read, or
    OSError when it is gone since."""
    path = os.fspath(path)
    certs, unparsed = _read(path)
    if not certs:
        raise ValueError(f"{path}: no certificates found" + (
            f" ({_unparsed_text(len(unparsed))})" if unparsed else ""))
    return certs


def unparsed_certificates(path: str | os.PathLike[str]) -> tuple[bytes, ...]:
    """The certificates of the trust store (DER) that `cryptography` cannot parse, though
    they have a certificate's outline (OpenSSL may read them: a chain's issuer may be
    among them, so that a verdict of no issuer is not established)."""
    return _read(os.fspath(path))[1]


def _unparsed_text(n: int) -> str:
    return (f"{n} certificate{'s' if n > 1 else ''} in it cannot be parsed by cryptography, "
            "though OpenSSL may read them")


def check_cafile(path: str, *, contents: bool = True, name: str = "--cafile") -> None:
    """A usage error (before any connection) when `path` cannot serve as `--cafile`: not
    there or a directory, or (with `contents`) unreadable, too large or without a
    certificate. A pipe serves (`--cafile <(cat a.pem b.pem)`: read once, then kept).
    `name`: the input as its caller spelt it (`cafile` from the Python API)."""
    if os.path.isdir(path) or not os.path.exists(path):
        raise UsageError(f"{name} {path}: "
                         + ("is a directory" if os.path.isdir(path) else "no such file"))
    if not contents:
        return
    try:
        load_trust_store(path)
    except UnreadableFile as exc:
        raise UnreadableFile(f"{name} {path}", exc.reason) from None
    except OSError as exc:
        raise UsageError(f"{name} {path}: {os_error_text(exc)}") from None
    except ValueError:
        unparsed = unparsed_certificates(path)
        raise UsageError(f"{name} {path}: " + (
            f"no certificate tlsprobe can use: {_unparsed_text(len(unparsed))}" if unparsed else
            "no certificates found (a PEM bundle or one DER certificate is expected)")) \
            from None
