"""The dialogues recorded from the real daemons (recorded.py), replayed into the sans-IO
machine whole, byte by byte and line by line: the client's side must match the recording
byte for byte, and each ends ready for TLS or with the failure the daemon's set-up implies."""
from __future__ import annotations


import pytest

from tests.starttls import recorded
from tests.starttls.dialogue import MODES, play

from tlsprobe.errors import FailureKind  # noqa: E402
from tlsprobe.net.starttls import Problem, Status  # noqa: E402

READY = [  # (transcript, protocol, banner, capability line)
    (recorded.POSTFIX_SMTP, "smtp", b"220 mx.test.invalid ESMTP tlsprobe-test", b"250-STARTTLS"),
    (recorded.DOVECOT_IMAP, "imap", recorded.DOVECOT_IMAP[0][1].rstrip(b"\r\n"),
     recorded.DOVECOT_IMAP[0][1].rstrip(b"\r\n")),
    (recorded.DOVECOT_POP3, "pop3", b"+OK Dovecot (Debian) ready.", b"STLS"),
    (recorded.DOVECOT_SIEVE, "sieve", b'"IMPLEMENTATION" "Dovecot (Debian) Pigeonhole"',
     b'"STARTTLS"'),
    (recorded.DOVECOT_LMTP, "lmtp", b"220 vm Dovecot (Debian) ready.", b"250 STARTTLS"),
    (recorded.VSFTPD_FTP, "ftp", b"220 (vsFTPd 3.0.3)", None),
    (recorded.PROSODY_XMPP, "xmpp", None, b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
    (recorded.PROSODY_XMPP_SERVER, "xmpp-server", None,
     b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
    (recorded.SLAPD_LDAP, "ldap", None, b"resultCode 0 (success)"),
    (recorded.MARIADB_MYSQL, "mysql", b"server version 5.5.5-10.11.19-MariaDB-0+deb12u1",
     b"capability flags 0x81fffffe (CLIENT_SSL)"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transcript,proto,banner,capability", READY,
                         ids=[r[1] for r in READY])
def test_recorded_dialogue_reaches_tls(transcript: list[tuple[str, bytes]], proto: str,
                                       banner: bytes | None, capability: bytes | None,
                                       mode: str) -> None:
    machine, step = play(proto, transcript, mode)
    assert step.status is Status.READY, step.failure
    record = machine.record
    if proto.startswith("xmpp"):   # the stream header carries a random id
        assert record.banner is not None and record.banner.startswith(b"<stream:stream ")
    else:
        assert record.banner == banner
    assert record.capability == capability
    assert record.lines[-1].sender == ("client" if proto == "mysql" else "server")
    sent = b"".join(data for who, data in transcript if who == "C")
    assert b"".join(line.data + (b"\r\n" if line.data + b"\r\n" in sent else b"")
                    for line in record.lines if line.sender == "client") == sent


NOT_OFFERED = [  # (transcript, protocol, text the message must quote)
    (recorded.POSTFIX_NOSTARTTLS_SMTP, "smtp", "EHLO keywords: 'PIPELINING SIZE 10240000"),
    (recorded.DOVECOT_NOSTARTTLS_IMAP, "imap", "capabilities: 'IMAP4rev1 SASL-IR"),
    (recorded.DOVECOT_NOSTARTTLS_POP3, "pop3", "CAPA list: 'CAPA TOP UIDL"),
    (recorded.DOVECOT_NOSTARTTLS_SIEVE, "sieve", "capabilities: 'IMPLEMENTATION SIEVE"),
    (recorded.DOVECOT_NOSTARTTLS_LMTP, "lmtp", "LHLO keywords: '8BITMIME CHUNKING"),
    (recorded.VSFTPD_NOSTARTTLS_FTP, "ftp", "'530 Please login with USER and PASS.'; the "
     "server's FEAT list: 'EPRT MDTM REST STREAM SIZE TVFS'"),
    (recorded.PROSODY_NOSTARTTLS_XMPP, "xmpp", "stream features: 'mechanisms'"),
    (recorded.PROSODY_NOSTARTTLS_XMPP_SERVER, "xmpp-server", "stream features: 'dialback'"),
    (recorded.SLAPD_NOSTARTTLS_LDAP, "ldap",
     "resultCode 2 (protocolError): 'unsupported extended operation'"),
    (recorded.MARIADB_NOSSL_MYSQL, "mysql", "lack CLIENT_SSL"),
    (recorded.POSTGRES_NOSSL_POSTGRES, "postgres", "answered 'N' to SSLRequest"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transcript,proto,quoted", NOT_OFFERED,
                         ids=[r[1] for r in NOT_OFFERED])
def test_recorded_server_without_tls_is_not_offered(transcript: list[tuple[str, bytes]],
                                                    proto: str, quoted: str,
                                                    mode: str) -> None:
    machine, step = play(proto, transcript, mode)
    assert step.status is Status.FAILED and step.failure is not None
    assert step.failure.problem is Problem.NOT_OFFERED
    assert step.failure.kind is FailureKind.NOT_TLS
    assert step.failure.message.startswith(f"{proto}: ")
    assert quoted in step.failure.message
    assert machine.record.capability is None
