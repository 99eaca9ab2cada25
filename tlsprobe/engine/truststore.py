"""The trust store: `--cafile` (a PEM bundle or one DER certificate, a pipe included) or the
system bundle, read once per file version and bounded in size; `check_cafile` tells a
usage error before any connection. engine/chain.py verifies chains against it.
"""

from __future__ import annotations

import os
import stat
import warnings
from functools import lru_cache

from cryptography import x509

from tlsprobe.errors import UsageError
from tlsprobe.model.pubkey import load_certificate

__all__ = ["MAX_TRUST_STORE", "SYSTEM_CAFILES", "TrustStoreTooLarge", "check_cafile",
           "default_cafile", "load_trust_store"]

SYSTEM_CAFILES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                  "/etc/ssl/cert.pem")

def default_cafile() -> str | None:
    """The system trust bundle, when there is one."""
    return next((p for p in SYSTEM_CAFILES if os.path.isfile(p)), None)


#: the largest trust store read (the system bundle is about 220 kB): more is no trust store,
#: and a device such as /dev/zero must not be read without end
MAX_TRUST_STORE = 64 * 1024 * 1024


class TrustStoreTooLarge(ValueError):
    """The file holds more than MAX_TRUST_STORE bytes."""


@lru_cache(maxsize=8)
def _load(path: str, stamp: tuple[float, int, int]) -> tuple[x509.Certificate, ...]:
    """The certificates of `path`; `stamp` (mtime, inode, device) tells a changed file, and
    a pipe (`--cafile <(cat a.pem b.pem)`, which can be read once) by its inode alone."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_TRUST_STORE + 1)
    if len(data) > MAX_TRUST_STORE:
        raise TrustStoreTooLarge(f"over {MAX_TRUST_STORE // 2**20} MiB: not a trust store")
    certs: list[x509.Certificate] = []
    marker = b"-----BEGIN CERTIFICATE-----"
    for block in data.split(marker)[1:]:  # one bad certificate must not hide the others
        try:
            with warnings.catch_warnings():  # e.g. a negative serial in a system root
                warnings.simplefilter("ignore")
                certs.extend(x509.load_pem_x509_certificates(marker + block))
        except ValueError:
            continue
    if not certs and data and marker not in data:
        try:
            certs.append(load_certificate(data))
        except ValueError:
            pass
    return tuple(certs)


def load_trust_store(path: str | os.PathLike[str]) -> tuple[x509.Certificate, ...]:
    """Every certificate in a PEM bundle (or one DER file). ValueError when none is there;
    OSError when the file cannot be read."""
    path = os.fspath(path)
    st = os.stat(path)
    certs = _load(path, (st.st_mtime if stat.S_ISREG(st.st_mode) else 0.0, st.st_ino,
                         st.st_dev))
    if not certs:
        raise ValueError(f"{path}: no certificates found")
    return certs


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
    except OSError as exc:
        raise UsageError(f"{name} {path}: {exc.strerror or exc}") from None
    except TrustStoreTooLarge as exc:
        raise UsageError(f"{name} {path}: {exc}") from None
    except ValueError:
        raise UsageError(f"{name} {path}: no certificates found (a PEM bundle or one DER "
                         "certificate is expected)") from None
