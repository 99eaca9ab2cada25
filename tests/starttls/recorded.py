"""Preamble dialogues recorded from the real daemons on loopback (Debian 12 packages: postfix
3.7, dovecot 2.3 with pigeonhole, vsftpd 3.0.3, prosody 0.12, slapd 2.5, mariadb 10.11,
postgresql 15), configured by tests/lab_servers/daemons*.py with and without TLS. Each is the
list of (sender, bytes) in order, as read by run_preamble over a recording socket wrapper;
"S" chunks are what one or more recv calls returned before the client spoke again.
"""

# flake8: noqa: E501
POSTFIX_SMTP = [
    ('S', b'220 mx.test.invalid ESMTP tlsprobe-test\r\n'),
    ('C', b'EHLO tlsprobe.invalid\r\n'),
    ('S', b'250-mx.test.invalid\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250-VRFY\r\n250-ETRN\r\n250-STARTTLS\r\n250-ENHANCEDSTATUSCODES\r\n250-8BITMIME\r\n250-DSN\r\n250-SMTPUTF8\r\n250 CHUNKING\r\n'),
    ('C', b'STARTTLS\r\n'),
    ('S', b'220 2.0.0 Ready to start TLS\r\n'),
]

DOVECOT_IMAP = [
    ('S', b'* OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE LITERAL+ STARTTLS AUTH=PLAIN] Dovecot (Debian) ready.\r\n'),
    ('C', b'a002 STARTTLS\r\n'),
    ('S', b'a002 OK Begin TLS negotiation now.\r\n'),
]

DOVECOT_POP3 = [
    ('S', b'+OK Dovecot (Debian) ready.\r\n'),
    ('C', b'CAPA\r\n'),
    ('S', b'+OK\r\nCAPA\r\nTOP\r\nUIDL\r\nRESP-CODES\r\nPIPELINING\r\nAUTH-RESP-CODE\r\nSTLS\r\nUSER\r\nSASL PLAIN\r\n.\r\n'),
    ('C', b'STLS\r\n'),
    ('S', b'+OK Begin TLS negotiation now.\r\n'),
]

DOVECOT_SIEVE = [
    ('S', b'"IMPLEMENTATION" "Dovecot (Debian) Pigeonhole"\r\n"SIEVE" "fileinto reject envelope encoded-character vacation subaddress comparator-i;ascii-numeric relational regex imap4flags copy include variables body enotify environment mailbox date index ihave duplicate mime foreverypart extracttext"\r\n"NOTIFY" "mailto"\r\n"SASL" "PLAIN"\r\n"STARTTLS"\r\n"VERSION" "1.0"\r\nOK "Dovecot (Debian) ready."\r\n'),
    ('C', b'STARTTLS\r\n'),
    ('S', b'OK "Begin TLS negotiation now."\r\n'),
]

DOVECOT_LMTP = [
    ('S', b'220 vm Dovecot (Debian) ready.\r\n'),
    ('C', b'LHLO tlsprobe.invalid\r\n'),
    ('S', b'250-vm\r\n250-8BITMIME\r\n250-CHUNKING\r\n250-ENHANCEDSTATUSCODES\r\n250-PIPELINING\r\n250 STARTTLS\r\n'),
    ('C', b'STARTTLS\r\n'),
    ('S', b'220 2.0.0 Begin TLS negotiation now.\r\n'),
]

VSFTPD_FTP = [
    ('S', b'220 (vsFTPd 3.0.3)\r\n'),
    ('C', b'FEAT\r\n'),
    ('S', b'211-Features:\r\n EPRT\r\n MDTM\r\n PBSZ\r\n PROT\r\n REST STREAM\r\n SIZE\r\n TVFS\r\n211 End\r\n'),
    ('C', b'AUTH TLS\r\n'),
    ('S', b'234 Proceed with negotiation.\r\n'),
]

PROSODY_XMPP = [
    ('C', b"<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
    ('S', b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' from='localhost' xml:lang='en' id='f4c38ccf-0a52-46d7-a53b-1cd18dcb9b4d' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'><stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-256</mechanism><mechanism>SCRAM-SHA-1</mechanism></mechanisms><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:features>"),
    ('C', b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
    ('S', b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
]

PROSODY_XMPP_SERVER = [
    ('C', b"<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:server' xmlns:db='jabber:server:dialback' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
    ('S', b"<?xml version='1.0'?><stream:stream xmlns='jabber:server' from='localhost' xml:lang='en' version='1.0' id='8ea37685-ebfa-4bb6-862f-ddd569b6caea' xmlns:stream='http://etherx.jabber.org/streams' xmlns:db='jabber:server:dialback' to=''><stream:features><dialback xmlns='urn:xmpp:features:dialback'/><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:features>"),
    ('C', b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
    ('S', b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
]

SLAPD_LDAP = [
    ('C', b'0\x1d\x02\x01\x01w\x18\x80\x161.3.6.1.4.1.1466.20037'),
    ('S', b'0\x0c\x02\x01\x01x\x07\n\x01\x00\x04\x00\x04\x00'),
]

MARIADB_MYSQL = [
    ('S', b'd\x00\x00\x00\n5.5.5-10.11.19-MariaDB-0+deb12u1\x00\x03\x00\x00\x00<qFI{Rh4\x00\xfe\xff\x08\x02\x00\xff\x81\x15\x00\x00\x00\x00\x00\x00\x1d\x00\x00\x00h0U:b_5*ou{-\x00mysql_native_password\x00'),
    ('C', b' \x00\x00\x01\x01\x8a\x00\x00\x00\x00\x00\x01\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'),
]

POSTFIX_NOSTARTTLS_SMTP = [
    ('S', b'220 mx.test.invalid ESMTP tlsprobe-test\r\n'),
    ('C', b'EHLO tlsprobe.invalid\r\n'),
    ('S', b'250-mx.test.invalid\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250-VRFY\r\n250-ETRN\r\n250-ENHANCEDSTATUSCODES\r\n250-8BITMIME\r\n250-DSN\r\n250-SMTPUTF8\r\n250 CHUNKING\r\n'),
]

DOVECOT_NOSTARTTLS_IMAP = [
    ('S', b'* OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE LITERAL+ AUTH=PLAIN] Dovecot (Debian) ready.\r\n'),
]

DOVECOT_NOSTARTTLS_POP3 = [
    ('S', b'+OK Dovecot (Debian) ready.\r\n'),
    ('C', b'CAPA\r\n'),
    ('S', b'+OK\r\nCAPA\r\nTOP\r\nUIDL\r\nRESP-CODES\r\nPIPELINING\r\nAUTH-RESP-CODE\r\nUSER\r\nSASL PLAIN\r\n.\r\n'),
]

DOVECOT_NOSTARTTLS_SIEVE = [
    ('S', b'"IMPLEMENTATION" "Dovecot (Debian) Pigeonhole"\r\n"SIEVE" "fileinto reject envelope encoded-character vacation subaddress comparator-i;ascii-numeric relational regex imap4flags copy include variables body enotify environment mailbox date index ihave duplicate mime foreverypart extracttext"\r\n"NOTIFY" "mailto"\r\n"SASL" "PLAIN"\r\n"VERSION" "1.0"\r\nOK "Dovecot (Debian) ready."\r\n'),
]

DOVECOT_NOSTARTTLS_LMTP = [
    ('S', b'220 vm Dovecot (Debian) ready.\r\n'),
    ('C', b'LHLO tlsprobe.invalid\r\n'),
    ('S', b'250-vm\r\n250-8BITMIME\r\n250-CHUNKING\r\n250-ENHANCEDSTATUSCODES\r\n250 PIPELINING\r\n'),
]

VSFTPD_NOSTARTTLS_FTP = [
    ('S', b'220 (vsFTPd 3.0.3)\r\n'),
    ('C', b'FEAT\r\n'),
    ('S', b'211-Features:\r\n EPRT\r\n MDTM\r\n REST STREAM\r\n SIZE\r\n TVFS\r\n211 End\r\n'),
    ('C', b'AUTH TLS\r\n'),
    ('S', b'530 Please login with USER and PASS.\r\n'),
]

PROSODY_NOSTARTTLS_XMPP = [
    ('C', b"<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
    ('S', b"<?xml version='1.0'?><stream:stream xmlns:stream='http://etherx.jabber.org/streams' id='1144bc13-3dad-4442-b28c-c4d213759131' xmlns='jabber:client' xml:lang='en' from='localhost' version='1.0'><stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism><mechanism>SCRAM-SHA-256</mechanism></mechanisms></stream:features>"),
]

PROSODY_NOSTARTTLS_XMPP_SERVER = [
    ('C', b"<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:server' xmlns:db='jabber:server:dialback' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
    ('S', b"<?xml version='1.0'?><stream:stream xmlns:stream='http://etherx.jabber.org/streams' id='4575dca8-3c4d-49f9-bddd-eabac2a8897a' version='1.0' xmlns='jabber:server' to='' xmlns:db='jabber:server:dialback' from='localhost' xml:lang='en'><stream:features><dialback xmlns='urn:xmpp:features:dialback'/></stream:features>"),
]

SLAPD_NOSTARTTLS_LDAP = [
    ('C', b'0\x1d\x02\x01\x01w\x18\x80\x161.3.6.1.4.1.1466.20037'),
    ('S', b'0*\x02\x01\x01x%\n\x01\x02\x04\x00\x04\x1eunsupported extended operation'),
]

MARIADB_NOSSL_MYSQL = [
    ('S', b'd\x00\x00\x00\n5.5.5-10.11.19-MariaDB-0+deb12u1\x00\x03\x00\x00\x00/oa{fllY\x00\xfe\xf7\x08\x02\x00\xff\x81\x15\x00\x00\x00\x00\x00\x00\x1d\x00\x00\x00[;TtlBCkng:-\x00mysql_native_password\x00'),
]

POSTGRES_NOSSL_POSTGRES = [
    ('C', b'\x00\x00\x00\x08\x04\xd2\x16/'),
    ('S', b'N'),
]

