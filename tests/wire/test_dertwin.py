"""wire/dertwin.der_twin: the DER twin of each certificate tests/helpers/bercert.py edits
into a form cryptography refuses and OpenSSL reads loads in cryptography with the fields
OpenSSL reads (`openssl x509 -subject -issuer -serial`), and the one no twin reads (the
signature algorithm's parameters) stays a ValueError."""
from __future__ import annotations

import subprocess

import pytest
from cryptography import x509

from tests.helpers.bercert import EDITS, WHOLE_EDITS, issued, mangled
from tlsprobe.wire.dertwin import der_twin, uncomparable_times

#: what OpenSSL prints for the edited leaf's subject (`-nameopt RFC2253`)
SUBJECTS = {"subject-printablestring-at": "CN=local@host", "subject-ia5string-latin1": "CN=loc\\C3\\A9l"}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("edit", [e for e in [*EDITS, *WHOLE_EDITS]
                                  if not e.startswith("rsa") and e != "algorithm-parameters"])
def test_the_twin_loads_with_the_fields_openssl_reads(edit: str) -> None:
    der = mangled(issued(ca_name="BER@Test CA"), edit)
    with pytest.raises((ValueError, x509.InvalidVersion)):
        x509.load_der_x509_certificate(der)
    shown = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject",
                            "-issuer", "-serial", "-nameopt", "RFC2253"], input=der,
                           capture_output=True, check=True, timeout=30).stdout.decode()
    twin = x509.load_der_x509_certificate(der_twin(der, odd_times=True))
    subject = SUBJECTS.get(edit, "CN=localhost")
    assert f"subject={subject}\n" in shown, shown   # the real tool first
    assert "issuer=CN=BER@Test CA\n" in shown and "serial=1234\n" in shown, shown
    assert twin.issuer.rfc4514_string() == "CN=BER@Test CA" and twin.serial_number == 0x1234
    assert twin.subject.rfc4514_string() == subject.replace("\\C3\\A9", "\u00e9")
    assert twin.version is x509.Version.v1 if edit == "version-v1-written-out" else \
        twin.version is x509.Version.v3
    assert (uncomparable_times(der)[0] is not None) is (edit == "utctime-without-seconds")


def test_a_certificate_no_twin_reads_stays_a_value_error() -> None:
    der = mangled(issued(), "algorithm-parameters")
    with pytest.raises(ValueError):
        x509.load_der_x509_certificate(der_twin(der))
