"""Constructed server dialogues for every protocol: go-aheads, refusals (reply code and text
quoted; final, or temporary in the protocol's words: busy, exit 3 once the retries are used
up), STARTTLS not offered (capabilities quoted), other protocols, early closes. Each case
is fed whole, byte by byte and line by line."""
from __future__ import annotations

import struct

import pytest

from tests.starttls.dialogue import (MODES, SERVER_HEAD, TLS_FEATURE, XMPP_HEAD, ldap_response,
                      mysql_error, mysql_greeting, pg_error, play)

from tlsprobe.errors import FailureKind, exit_code_for  # noqa: E402
from tlsprobe.net.starttls import Problem, StartTls, Status  # noqa: E402
from tlsprobe.net.starttls_binary import SSL_REQUEST, ldap_request  # noqa: E402

OK = None
EHLO = b"EHLO tlsprobe.invalid\r\n"
STARTTLS_EL = b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"


CASES = [  # id, protocol, transcript, problem (None: ready), text the message must contain
    ("smtp-ok", "smtp", [("S", b"220-mx first\r\n220 mx ready\r\n"), ("C", EHLO),
                         ("S", b"250-mx\r\n250-SIZE 1000\r\n250 STARTTLS\r\n"),
                         ("C", b"STARTTLS\r\n"), ("S", b"220 2.0.0 go\r\n")], OK, ""),
    ("smtp-refused", "smtp", [("S", b"220 mx\r\n"), ("C", EHLO), ("S", b"250-mx\r\n250 STARTTLS\r\n"),
                              ("C", b"STARTTLS\r\n"),
                              ("S", b"554 5.7.3 Unable to initialize security subsystem\r\n")],
     Problem.REFUSED, "smtp: the server refused STARTTLS: '554 5.7.3 Unable to initialize "
     "security subsystem'"),
    ("smtp-454-busy", "smtp", [("S", b"220 mx\r\n"), ("C", EHLO),
                               ("S", b"250-mx\r\n250 STARTTLS\r\n"), ("C", b"STARTTLS\r\n"),
                               ("S", b"454 4.7.0 TLS not available due to temporary reason\r\n")],
     Problem.BUSY, "smtp: the server refused STARTTLS temporarily: '454 4.7.0 TLS not available "
     "due to temporary reason'"),
    ("smtp-421-greeting", "smtp", [("S", b"421 4.3.2 Service not available\r\n")], Problem.BUSY,
     "smtp: the server refused the session temporarily: '421 4.3.2 Service not available'"),
    ("smtp-421-ehlo", "smtp", [("S", b"220 mx\r\n"), ("C", EHLO),
                               ("S", b"421 4.7.0 mx Error: too many connections\r\n")],
     Problem.BUSY, "refused EHLO temporarily: '421 4.7.0 mx Error: too many connections'"),
    ("lmtp-421-greeting", "lmtp", [("S", b"421 4.3.2 shutting down\r\n")], Problem.BUSY,
     "lmtp: the server refused the session temporarily"),
    ("smtp-554-greeting", "smtp", [("S", b"554 5.3.2 no service for you\r\n")], Problem.REFUSED,
     "refused the session: '554 5.3.2 no service for you'"),
    ("smtp-ehlo-refused", "smtp", [("S", b"220 mx\r\n"), ("C", EHLO),
                                   ("S", b"550 5.7.1 Client host rejected\r\n")],
     Problem.REFUSED, "refused EHLO: '550 5.7.1"),
    # EHLO unknown to a server with enhanced status codes: LMTP (Dovecot's answer)
    ("smtp-ehlo-unknown", "smtp", [("S", b"220 mx\r\n"), ("C", EHLO),
                                   ("S", b"502 5.5.2 command not recognized\r\n")],
     Problem.WRONG_PROTOCOL, "not speaking smtp: the server does not know EHLO ('502 5.5.2 "
     "command not recognized'): an LMTP server? try --starttls lmtp"),
    ("smtp-ehlo-500", "smtp", [("S", b"220 old.test\r\n"), ("C", EHLO),
                               ("S", b"500 'EHLO': command not understood\r\n")],
     Problem.NOT_OFFERED, "smtp: the server does not know EHLO ('500 \\'EHLO\\': command not "
     "understood'), so it offers no STARTTLS: an FTP server? try --starttls ftp"),
    ("smtp-auth-first", "smtp", [("S", b"220 mx\r\n"), ("C", EHLO),
                                 ("S", b"530 5.7.0 Authentication required\r\n")],
     Problem.REFUSED, "smtp: the server refused EHLO: '530 5.7.0"),
    # FTP against an SMTP server (Exim: no enhanced codes, ESMTP in its greeting)
    ("ftp-exim", "ftp", [("S", b"220 mx.test ESMTP Exim 4.96\r\n"), ("C", b"FEAT\r\n"),
                         ("S", b"500 unrecognized command\r\n"), ("C", b"AUTH TLS\r\n"),
                         ("S", b"503 AUTH command used when not advertised\r\n")],
     Problem.WRONG_PROTOCOL, "not speaking ftp: it sent SMTP or LMTP replies ('220 mx.test "
     "ESMTP Exim 4.96'): try --starttls smtp or lmtp"),
    ("smtp-imap-server", "smtp", [("S", b"* OK [CAPABILITY IMAP4rev1] ready\r\n")],
     Problem.WRONG_PROTOCOL, "not speaking smtp: it sent an IMAP greeting ('* OK"),
    ("smtp-ssh-server", "smtp", [("S", b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")],
     Problem.WRONG_PROTOCOL, "not speaking smtp: it sent an SSH banner"),
    ("smtp-closed", "smtp", [("S", b"220 mx\r\n"), ("C", EHLO), ("S", b"250-mx\r\n")],
     None, ""),  # still waiting: checked below with EOF
    ("imap-capability", "imap", [("S", b"* OK ready\r\n"), ("C", b"a001 CAPABILITY\r\n"),
                                 ("S", b"* CAPABILITY IMAP4rev1 STARTTLS LOGINDISABLED\r\n"
                                       b"a001 OK done\r\n"),
                                 ("C", b"a002 STARTTLS\r\n"), ("S", b"a002 OK Begin TLS\r\n")],
     OK, ""),
    ("imap-no", "imap", [("S", b"* OK [CAPABILITY IMAP4rev1 STARTTLS] hi\r\n"),
                         ("C", b"a002 STARTTLS\r\n"), ("S", b"a002 NO TLS is broken today\r\n")],
     Problem.REFUSED, "refused STARTTLS: 'a002 NO TLS is broken today'"),
    ("imap-preauth", "imap", [("S", b"* PREAUTH welcome back\r\n")], Problem.REFUSED, "PREAUTH"),
    ("imap-bye", "imap", [("S", b"* BYE too many connections\r\n")], Problem.BUSY,
     "imap: the server refused the session temporarily: '* BYE too many connections'"),
    ("imap-bye-final", "imap", [("S", b"* BYE [PRIVACYREQUIRED] use port 993\r\n")],
     Problem.REFUSED, "refused the session: '* BYE [PRIVACYREQUIRED] use port 993'"),
    ("imap-no-unavailable", "imap", [("S", b"* OK [CAPABILITY IMAP4rev1 STARTTLS] hi\r\n"),
                                     ("C", b"a002 STARTTLS\r\n"),
                                     ("S", b"a002 NO [UNAVAILABLE] TLS backend down\r\n")],
     Problem.BUSY, "refused STARTTLS temporarily: 'a002 NO [UNAVAILABLE] TLS backend down'"),
    ("imap-bye-at-starttls", "imap", [("S", b"* OK [CAPABILITY IMAP4rev1 STARTTLS] hi\r\n"),
                                      ("C", b"a002 STARTTLS\r\n"),
                                      ("S", b"* BYE [UNAVAILABLE] Server shutting down\r\n")],
     Problem.BUSY, "refused STARTTLS temporarily: '* BYE [UNAVAILABLE] Server shutting down'"),
    ("imap-pop3-server", "imap", [("S", b"+OK POP3 ready\r\n")], Problem.WRONG_PROTOCOL,
     "a POP3 greeting"),
    ("pop3-no-capa", "pop3", [("S", b"+OK hi\r\n"), ("C", b"CAPA\r\n"), ("S", b"-ERR what\r\n"),
                              ("C", b"STLS\r\n"), ("S", b"+OK go\r\n")], OK, ""),
    ("pop3-stls-err", "pop3", [("S", b"+OK hi\r\n"), ("C", b"CAPA\r\n"),
                               ("S", b"+OK\r\nSTLS\r\n..dotted\r\n.\r\n"), ("C", b"STLS\r\n"),
                               ("S", b"-ERR [SYS/TEMP] not now\r\n")],
     Problem.BUSY, "refused STLS temporarily: '-ERR [SYS/TEMP] not now'"),
    ("pop3-stls-final", "pop3", [("S", b"+OK hi\r\n"), ("C", b"CAPA\r\n"),
                                 ("S", b"+OK\r\nSTLS\r\n.\r\n"), ("C", b"STLS\r\n"),
                                 ("S", b"-ERR [SYS/PERM] no TLS here\r\n")],
     Problem.REFUSED, "refused STLS: '-ERR [SYS/PERM] no TLS here'"),
    ("pop3-greeting-in-use", "pop3", [("S", b"-ERR [IN-USE] too many sessions\r\n")],
     Problem.BUSY, "refused the session temporarily: '-ERR [IN-USE] too many sessions'"),
    ("ftp-feat-auth", "ftp", [("S", b"120 wait\r\n220 hi\r\n"), ("C", b"FEAT\r\n"),
                              ("S", b"211-Features:\r\n AUTH TLS;TLS-C;SSL\r\n PBSZ\r\n211 End\r\n"),
                              ("C", b"AUTH TLS\r\n"), ("S", b"234 go\r\n")], OK, ""),
    ("ftp-unknown-command", "ftp", [("S", b"220 hi\r\n"), ("C", b"FEAT\r\n"),
                                    ("S", b"500 unknown\r\n"), ("C", b"AUTH TLS\r\n"),
                                    ("S", b"500 AUTH not understood\r\n")],
     Problem.NOT_OFFERED, "ftp: AUTH TLS not offered: '500 AUTH not understood'"),
    ("ftp-refused", "ftp", [("S", b"220 hi\r\n"), ("C", b"FEAT\r\n"),
                            ("S", b"211-Features:\r\n AUTH TLS\r\n211 End\r\n"),
                            ("C", b"AUTH TLS\r\n"), ("S", b"534 Policy forbids TLS\r\n")],
     Problem.REFUSED, "refused AUTH TLS: '534 Policy forbids TLS'"),
    ("ftp-431-busy", "ftp", [("S", b"220 hi\r\n"), ("C", b"FEAT\r\n"),
                             ("S", b"211-Features:\r\n AUTH TLS\r\n211 End\r\n"),
                             ("C", b"AUTH TLS\r\n"), ("S", b"431 unable to start TLS\r\n")],
     Problem.BUSY, "refused AUTH TLS temporarily: '431 unable to start TLS'"),
    ("ftp-421-greeting", "ftp", [("S", b"421 There are too many connections from your internet "
                                       b"address.\r\n")],
     Problem.BUSY, "ftp: the server refused the session temporarily: '421 There are too many"),
    ("ftp-421-feat", "ftp", [("S", b"220 hi\r\n"), ("C", b"FEAT\r\n"),
                             ("S", b"421 Timeout.\r\n")],
     Problem.BUSY, "refused FEAT temporarily: '421 Timeout.'"),
    ("nntp-ok", "nntp", [("S", b"200 news ready\r\n"), ("C", b"CAPABILITIES\r\n"),
                         ("S", b"101 caps\r\nVERSION 2\r\nSTARTTLS\r\nREADER\r\n.\r\n"),
                         ("C", b"STARTTLS\r\n"), ("S", b"382 Continue with TLS\r\n")], OK, ""),
    ("nntp-580", "nntp", [("S", b"201 no posting\r\n"), ("C", b"CAPABILITIES\r\n"),
                          ("S", b"101 caps\r\nSTARTTLS\r\n.\r\n"), ("C", b"STARTTLS\r\n"),
                          ("S", b"580 Can not initiate TLS\r\n")],
     Problem.REFUSED, "'580 Can not initiate TLS'"),
    ("nntp-400", "nntp", [("S", b"400 Service temporarily unavailable\r\n")], Problem.BUSY,
     "nntp: the server refused the session temporarily: '400 Service temporarily"),
    ("nntp-not-offered", "nntp", [("S", b"200 news\r\n"), ("C", b"CAPABILITIES\r\n"),
                                  ("S", b"101 caps\r\nVERSION 2\r\nREADER\r\n.\r\n")],
     Problem.NOT_OFFERED, "CAPABILITIES: 'VERSION 2 READER'"),
    ("nntp-smtp-server", "nntp", [("S", b"220 mx ESMTP\r\n")], Problem.WRONG_PROTOCOL,
     "an SMTP or FTP banner"),
    ("sieve-no", "sieve", [("S", b'"STARTTLS"\r\nOK "hi"\r\n'), ("C", b"STARTTLS\r\n"),
                           ("S", b'NO "TLS unavailable"\r\n')], Problem.REFUSED,
     "'NO \"TLS unavailable\"'"),
    ("sieve-trylater", "sieve", [("S", b'"STARTTLS"\r\nOK "hi"\r\n'), ("C", b"STARTTLS\r\n"),
                                 ("S", b'NO (TRYLATER) "TLS backend busy"\r\n')],
     Problem.BUSY, "sieve: the server refused STARTTLS temporarily: 'NO (TRYLATER)"),
    ("sieve-bye-trylater", "sieve", [("S", b'BYE (TRYLATER) "Too many connections"\r\n')],
     Problem.BUSY, "sieve: the server refused the session temporarily"),
    ("irc-throttled", "irc", [("C", b"STARTTLS\r\n"),
                              ("S", b"ERROR :Closing Link: 127.0.0.1 (Throttled: Reconnecting too "
                                    b"fast)\r\n")],
     Problem.BUSY, "irc: the server refused the connection temporarily: 'ERROR :Closing Link"),
    ("irc-ok", "irc", [("C", b"STARTTLS\r\n"),
                       ("S", b":irc.local NOTICE * :*** Looking up your hostname...\r\n"
                             b":irc.local 670 * :STARTTLS successful, go ahead\r\n")], OK, ""),
    ("irc-691", "irc", [("C", b"STARTTLS\r\n"), ("S", b":irc.local 691 * :STARTTLS failed\r\n")],
     Problem.REFUSED, "':irc.local 691 * :STARTTLS failed'"),
    ("irc-421", "irc", [("C", b"STARTTLS\r\n"),
                        ("S", b":irc.local 421 * STARTTLS :Unknown command\r\n")],
     Problem.NOT_OFFERED, "Unknown command"),
    ("irc-http-server", "irc", [("C", b"STARTTLS\r\n"),
                                ("S", b"HTTP/1.1 400 Bad Request\r\n\r\n")],
     Problem.WRONG_PROTOCOL, "not speaking irc: it sent an HTTP response"),
    ("xmpp-ok-proceed-element", "xmpp", [
        ("C", XMPP_HEAD), ("S", SERVER_HEAD + b"\n<stream:features>" + TLS_FEATURE +
                           b"</stream:features>"),
        ("C", STARTTLS_EL), ("S", b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'></proceed>")],
     OK, ""),
    ("xmpp-failure", "xmpp", [
        ("C", XMPP_HEAD), ("S", SERVER_HEAD + b"<stream:features>" + TLS_FEATURE +
                           b"</stream:features>"),
        ("C", STARTTLS_EL), ("S", b"<failure xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")],
     Problem.REFUSED, "refused STARTTLS: '<failure"),
    ("xmpp-stream-error", "xmpp", [
        ("C", XMPP_HEAD), ("S", SERVER_HEAD + b"<stream:error><host-unknown xmlns='urn:ietf:"
                           b"params:xml:ns:xmpp-streams'/></stream:error>")],
     Problem.REFUSED, "stream error 'host-unknown'"),
    # an empty <stream:error/>: the error itself, not "closed while we waited" for its end
    ("xmpp-empty-stream-error", "xmpp", [
        ("C", XMPP_HEAD), ("S", SERVER_HEAD + b"<stream:error/></stream:stream>")],
     Problem.REFUSED, "xmpp: stream error (none)"),
    ("xmpp-resource-constraint", "xmpp", [
        ("C", XMPP_HEAD), ("S", SERVER_HEAD + b"<stream:error><resource-constraint xmlns='urn:"
                           b"ietf:params:xml:ns:xmpp-streams'/></stream:error>")],
     Problem.BUSY, "xmpp: stream error 'resource-constraint' (temporary)"),
    ("xmpp-shutdown-at-starttls", "xmpp-server", [
        ("C", XMPP_HEAD.replace(b"jabber:client", b"jabber:server' xmlns:db='jabber:server:"
                                                  b"dialback")),
        ("S", SERVER_HEAD + b"<stream:features>" + TLS_FEATURE + b"</stream:features>"),
        ("C", STARTTLS_EL), ("S", b"<stream:error><system-shutdown xmlns='urn:ietf:params:xml:"
                                  b"ns:xmpp-streams'/></stream:error>")],
     Problem.BUSY, "xmpp-server: stream error 'system-shutdown' (temporary)"),
    ("xmpp-dtd", "xmpp", [("C", XMPP_HEAD), ("S", b"<!DOCTYPE x [<!ENTITY a 'b'>]>")],
     Problem.MALFORMED, "a DTD or comment"),
    ("xmpp-old-stream", "xmpp", [("C", XMPP_HEAD), ("S", SERVER_HEAD.replace(b" version='1.0'>",
                                                                            b">"))],
     Problem.NOT_OFFERED, "without version='1.0'"),
    ("xmpp-http-server", "xmpp", [("C", XMPP_HEAD), ("S", b"HTTP/1.0 400 Bad\r\n\r\n")],
     Problem.WRONG_PROTOCOL, "not speaking xmpp: it sent "),
    ("ldap-unavailable", "ldap", [("C", ldap_request()),
                                  ("S", ldap_response(52, b"Could not initialize TLS"))],
     Problem.REFUSED, "resultCode 52 (unavailable): 'Could not initialize TLS'"),
    ("ldap-disconnect", "ldap", [("C", ldap_request()),
                                 ("S", ldap_response(2, b"bye", 0, b"1.3.6.1.4.1.1466.20036"))],
     Problem.REFUSED, "notice of disconnection"),
    ("ldap-shutting-down", "ldap", [("C", ldap_request()),
                                    ("S", ldap_response(52, b"bye", 0,
                                                        b"1.3.6.1.4.1.1466.20036"))],
     Problem.BUSY, "ldap: the server refused the session (notice of disconnection) "
     "temporarily, resultCode 52 (unavailable): 'bye'"),
    ("ldap-busy", "ldap", [("C", ldap_request()), ("S", ldap_response(51, b"too busy"))],
     Problem.BUSY, "ldap: the server refused StartTLS temporarily, resultCode 51 (busy)"),
    ("ldap-long-length", "ldap", [("C", ldap_request()), ("S", b"\x30\x81\x0c" +
                                                          ldap_response(0)[2:])], OK, ""),
    ("ldap-truncated-element", "ldap", [("C", ldap_request()),
                                        ("S", b"\x30\x07\x02\x01\x01\x78\x05\x0a\x09\x00")],
     Problem.MALFORMED, "ldap: malformed"),
    ("ldap-tls-server", "ldap", [("C", ldap_request()), ("S", b"\x15\x03\x03\x00\x02\x02\x46")],
     Problem.WRONG_PROTOCOL, "a TLS record (an implicit-TLS port?"),
    ("postgres-ok", "postgres", [("C", SSL_REQUEST), ("S", b"S")], OK, ""),
    ("postgres-error", "postgres", [("C", SSL_REQUEST), ("S", b"E" + struct.pack("!I", 30) +
                                                         b"SFATAL\x00C08P01\x00Mbad proto\x00\x00")],
     Problem.REFUSED, "refused SSLRequest: '08P01' 'bad proto'"),
    ("postgres-too-many", "postgres", [
        ("C", SSL_REQUEST),
        ("S", pg_error(b"SFATAL\x00C53300\x00Msorry, too many clients\x00\x00"))],
     Problem.BUSY, "refused SSLRequest temporarily: '53300' 'sorry, too many clients'"),
    ("postgres-starting-up", "postgres", [
        ("C", SSL_REQUEST), ("S", pg_error(b"SFATAL\x00C57P03\x00Mthe database system is "
                                           b"starting up\x00\x00"))],
     Problem.BUSY, "refused SSLRequest temporarily: '57P03'"),
    ("postgres-fork-failure", "postgres", [
        ("C", SSL_REQUEST),
        ("S", b"Ecould not fork new process for connection: Resource temporarily unavailable"
              b"\n\x00")],
     Problem.BUSY, "postgres: the server refused the connection temporarily: 'could not fork "
     "new process for connection: Resource temporarily unavailable'"),
    ("postgres-smtp-server", "postgres", [("C", SSL_REQUEST), ("S", b"220 mx ESMTP\r\n")],
     Problem.WRONG_PROTOCOL, "not speaking postgres: it sent an SMTP or FTP banner"),
    ("mysql-refused", "mysql", [("S", mysql_error(1130, b"Host '10.1.1.1' is not allowed"))],
     Problem.REFUSED, "error 1130 'Host \\'10.1.1.1\\' is not allowed'"),
    ("mysql-too-many", "mysql", [("S", mysql_error(1040, b"Too many connections"))],
     Problem.BUSY, "mysql: the server refused the connection (error 1040) temporarily: "
     "'Too many connections'"),
    ("mysql-smtp-server", "mysql", [("S", b"220 mx ESMTP\r\n")], Problem.WRONG_PROTOCOL,
     "not speaking mysql: it sent an SMTP or FTP banner"),
    # vsftpd on a port of implicit TLS answers a client-first preamble with its TLS
    # library's error (recorded from vsftpd 3.0.3, implicit_ssl=YES)
    ("postgres-implicit-tls-ftp", "postgres",
     [("C", SSL_REQUEST), ("S", b"500 OOPS: error:0A00010B:SSL routines::wrong version "
                                b"number\r\n")], Problem.WRONG_PROTOCOL,
     "not speaking postgres: it sent an error of a TLS library (an implicit-TLS port? try "
     "without --starttls) ('500 OOPS: error:0A00010B:SSL routines::wrong version number"),
    ("ldap-ftp-error-reply", "ldap", [("C", ldap_request()), ("S", b"500 OOPS: \r\n")],
     Problem.WRONG_PROTOCOL, "not speaking ldap: it sent an SMTP or FTP reply ('500 OOPS: "),
    ("smtp-mysql-server", "smtp", [("S", mysql_greeting(0x0200 | 0x8000))],
     Problem.WRONG_PROTOCOL, "not speaking smtp: it sent a MySQL or MariaDB greeting ("),
    ("imap-sieve-server", "imap", [("S", b'"IMPLEMENTATION" "Dovecot Pigeonhole"\r\n')],
     Problem.WRONG_PROTOCOL, "not speaking imap: it sent a ManageSieve greeting ("),
    ("mysql-no-ssl", "mysql", [("S", mysql_greeting(0x0200 | 0x8000))], Problem.NOT_OFFERED,
     "'10.11.6-MariaDB' capability flags 0x00008200 lack CLIENT_SSL"),
]
FAILURE_EXIT = {Problem.REFUSED: 5, Problem.NOT_OFFERED: 4, Problem.WRONG_PROTOCOL: 4,
                Problem.MALFORMED: 6, Problem.BUSY: 3}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("proto,transcript,problem,text", [c[1:] for c in CASES if c[0] !=
                                                           "smtp-closed"],
                         ids=[c[0] for c in CASES if c[0] != "smtp-closed"])
def test_dialogue(proto: str, transcript: list[tuple[str, bytes]], problem: Problem | None,
                  text: str, mode: str) -> None:
    machine, step = play(proto, transcript, mode)
    if problem is None:
        assert step.status is Status.READY, step.failure
        assert machine.record.lines[-1].sender == "server"
        return
    assert step.status is Status.FAILED and step.failure is not None
    assert step.failure.problem is problem, step.failure.message
    assert text in step.failure.message
    assert exit_code_for(step.failure.kind) == FAILURE_EXIT[problem]
    if problem is Problem.REFUSED:   # a plain-text refusal has its own kind, not "alert"
        assert step.failure.kind is FailureKind.REFUSED
    assert "\n" not in step.failure.message and "\r" not in step.failure.message


def test_mysql_ssl_request_packet() -> None:
    """With CLIENT_SSL offered the client answers with the 32-byte SSL request (sequence 1,
    CLIENT_SSL and CLIENT_PROTOCOL_41 set, the server's charset) and is at once ready."""
    greeting = mysql_greeting(0x0200 | 0x0800 | 0x8000)
    machine = StartTls("mysql")
    assert machine.start().send == b""
    step = machine.receive_data(greeting)
    assert step.status is Status.READY
    packet = step.send
    assert packet[:4] == b"\x20\x00\x00\x01" and len(packet) == 36
    caps, max_packet, charset = struct.unpack("<IIB", packet[4:13])
    assert caps & 0x0800 and caps & 0x0200 and charset == 0x21 and packet[13:] == bytes(23)
    assert machine.record.capability == b"capability flags 0x00008a00 (CLIENT_SSL)"


@pytest.mark.parametrize("proto,transcript,waiting", [
    ("smtp", [("S", b"220 mx\r\n"), ("C", EHLO), ("S", b"250-mx\r\n")], "the EHLO reply"),
    ("imap", [], "the greeting"),
    ("postgres", [("C", SSL_REQUEST)], "the SSLRequest answer"),
])
def test_close_before_tls_names_the_step(proto: str, transcript: list[tuple[str, bytes]],
                                         waiting: str) -> None:
    machine, step = play(proto, transcript)
    assert step.status is Status.NEED_DATA and machine.waiting == waiting
    step = machine.receive_data(b"")
    assert step.failure is not None and step.failure.problem is Problem.CLOSED
    assert step.failure.kind is FailureKind.CLOSED
    assert f"closed the connection while we waited for {waiting}" in step.failure.message


def test_bytes_after_the_go_ahead_are_refused() -> None:
    """A server that sends data after its go-ahead (the pre-TLS injection of CVE-2021-23222
    and the STARTTLS command-injection family) fails instead of handing it to TLS."""
    machine, step = play("postgres", [("C", SSL_REQUEST), ("S", b"SE\x00\x00")])
    assert step.failure is not None and step.failure.problem is Problem.MALFORMED
    assert "'E\\x00\\x00' after its go-ahead" in step.failure.message
    machine, step = play("smtp", [("S", b"220 mx\r\n"), ("C", EHLO),
                                  ("S", b"250-mx\r\n250 STARTTLS\r\n"),
                                  ("C", b"STARTTLS\r\n"),
                                  ("S", b"220 go\r\n")], "bytes")
    assert step.status is Status.READY
    step = machine.receive_data(b"x")
    assert step.failure is not None and step.failure.problem is Problem.MALFORMED
