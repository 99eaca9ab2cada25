"""Line-based STARTTLS dialogues: SMTP/LMTP, IMAP, POP3, FTP, NNTP, ManageSieve, IRC.

Each is a generator (see starttls_base): it reads the greeting, learns whether the server
offers TLS (EHLO/LHLO, CAPABILITY, CAPA, FEAT, CAPABILITIES, the ManageSieve greeting), asks
for it and returns at the server's go-ahead. Failures quote what the server said: its
capability list when STARTTLS is not offered, its reply code and text when it refuses.
References: RFC 3207 (SMTP), 2033 (LMTP), 3501/9051 (IMAP), 2595 (POP3, IMAP), 4217 (FTP),
4642 (NNTP), 5804 (ManageSieve), IRCv3 tls extension (670/691).

A refusal the protocol marks as temporary is `busy` (Problem.BUSY, retried with backoff by
net/starttls_connect.py): an SMTP/LMTP/FTP 4xx reply (RFC 5321 4.2.1: 421 service not
available, 3207: 454 TLS not available due to temporary reason, 959/2228: 421, 431), an IMAP
BYE (RFC 3501 7.1.5) unless its response code is a permanent one (RFC 5530), an IMAP NO
[UNAVAILABLE] or [INUSE], a POP3 -ERR [SYS/TEMP] or [IN-USE] (RFC 3206), an NNTP 400 or
403 (RFC 3977 3.2.1), a ManageSieve (TRYLATER) (RFC 5804 1.3), an IRC ERROR that says it
throttles. Any other refusal is final.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator

from tlsprobe.net.starttls_base import (
    Context,
    Dialogue,
    Line,
    Note,
    PreambleFailure,
    Problem,
    Request,
    Send,
    busy,
    not_speaking,
    quote,
    try_starttls,
)

_CODE = re.compile(rb"\d{3}[ -]")
_CODE3 = re.compile(rb"\d{3}")
MAX_CAPS_SHOWN = 20


def _reply(proto: str, first: bool, waiting: str
           ) -> Generator[Request, bytes, tuple[bytes, list[bytes]]]:
    """A multi-line reply of SMTP/LMTP/FTP style ("250-..." lines, "250 ..." last); the
    generator's value is (code, lines). FTP continuation lines may carry any text."""
    start = _CODE if first else None
    line = yield Line(waiting, start, 4 if first else 0)
    if not _CODE.match(line) and not re.fullmatch(rb"\d{3}", line):
        raise not_speaking(proto, line) if first else PreambleFailure(
            Problem.MALFORMED, f"{proto}: {waiting}: not a reply line: {quote(line)}")
    code, lines = line[:3], [line]
    if line[3:4] == b"-":
        while True:
            line = yield Line(waiting)
            lines.append(line)
            if line[:3] == code and line[3:4] in (b" ", b""):
                break
    return code, lines


def _said(lines: list[bytes]) -> bytes:
    """A whole reply as the server said it (a multi-line refusal's reason is often in its
    first lines, not its last), for a message that quotes it."""
    return b"\r\n".join(lines)


def _caps_text(keywords: list[bytes]) -> str:
    """A capability list for a message: at most MAX_CAPS_SHOWN keywords, escaped."""
    shown = b" ".join(keywords[:MAX_CAPS_SHOWN])
    return quote(shown, 300) + (f" (+{len(keywords) - MAX_CAPS_SHOWN} more)"
                                if len(keywords) > MAX_CAPS_SHOWN else "")


def _refused(proto: str, what: str, line: bytes) -> PreambleFailure:
    return PreambleFailure(Problem.REFUSED, f"{proto}: the server refused {what}: {quote(line)}")


def _refused_code(proto: str, what: str, code: bytes, line: bytes) -> PreambleFailure:
    """A refusal by an SMTP/LMTP/FTP reply code: 4xx is temporary, anything else final."""
    return busy(proto, what, line) if code[:1] == b"4" else _refused(proto, what, line)


#: RFC 5530 response codes that make an IMAP BYE or NO final; any other code, or none, on a
#: BYE is the server not serving now (overload, shutdown: RFC 3501 7.1.5)
_IMAP_FINAL = {b"PRIVACYREQUIRED", b"CONTACTADMIN", b"AUTHORIZATIONFAILED",
               b"AUTHENTICATIONFAILED", b"NOPERM", b"CANNOT", b"CLIENTBUG", b"EXPIRED"}
_IMAP_TEMPORARY = {b"UNAVAILABLE", b"INUSE"}
_IMAP_CODE = re.compile(rb"\[([A-Za-z/-]+)")


def _imap_code(text: bytes) -> bytes:
    found = _IMAP_CODE.search(text)
    return found.group(1).upper() if found else b""


def _imap_bye(what: str, line: bytes) -> PreambleFailure:
    return _refused("imap", what, line) if _imap_code(line) in _IMAP_FINAL else \
        busy("imap", what, line)


def _imap_no(what: str, line: bytes) -> PreambleFailure:
    return busy("imap", what, line) if _imap_code(line) in _IMAP_TEMPORARY else \
        _refused("imap", what, line)


def _pop3_err(what: str, line: bytes) -> PreambleFailure:
    code = _imap_code(line)
    return busy("pop3", what, line) if code in (b"SYS/TEMP", b"IN-USE") else \
        _refused("pop3", what, line)


#: an enhanced status code (RFC 3463) after a reply code: SMTP's and LMTP's, never FTP's
_ENHANCED = re.compile(rb"\d{3}[ -][245]\.\d{1,3}\.\d{1,3}(?: |$)")
#: a greeting that names the SMTP family (RFC 5321 4.3.1: "ESMTP" in an ESMTP greeting)
_SMTP_GREETING = re.compile(rb"\b(?:E?SMTP|LMTP)\b")


def _hello_unknown(proto: str, hello: str, code: bytes, line: bytes
                   ) -> PreambleFailure | None:
    """EHLO/LHLO not taken by a server of another protocol (None: a refusal). 500 or 502
    (RFC 5321 4.2.4: unrecognized, not implemented) with an enhanced status code: the other
    of SMTP and LMTP (a server with those codes knows EHLO, an LMTP server LHLO); without
    one, FTP or an SMTP server without EHLO, which has no STARTTLS either. 530 without one:
    an FTP server that wants a login first (vsftpd)."""
    enhanced = _ENHANCED.match(line) is not None
    if code in (b"500", b"502") and enhanced:
        other = "lmtp" if proto == "smtp" else "smtp"
        return PreambleFailure(Problem.WRONG_PROTOCOL, f"not speaking {proto}: the server "
                               f"does not know {hello} ({quote(line)}): an {other.upper()} "
                               f"server? {try_starttls(other)}")
    if code in (b"500", b"502"):
        return PreambleFailure(Problem.NOT_OFFERED, f"{proto}: the server does not know "
                               f"{hello} ({quote(line)}), so it offers no STARTTLS: an FTP "
                               f"server? {try_starttls('ftp')}")
    if code == b"530" and not enhanced:
        return PreambleFailure(Problem.WRONG_PROTOCOL, f"not speaking {proto}: the server "
                               f"wants a login before {hello} ({quote(line)}): an FTP server? "
                               + try_starttls("ftp"))
    return None


def _smtp_evidence(greeting: bytes, replies: list[bytes]) -> bytes | None:
    """What shows an "FTP" server to be of the SMTP family: a reply with an enhanced status
    code, else a greeting that says ESMTP, SMTP or LMTP; None when nothing does."""
    found = [line for line in replies if _ENHANCED.match(line)]
    return found[0] if found else greeting if _SMTP_GREETING.search(greeting) else None


def _not_offered(proto: str, keywords: list[bytes], where: str) -> PreambleFailure:
    return PreambleFailure(Problem.NOT_OFFERED, f"{proto}: STARTTLS not offered; the server's "
                           f"{where}: {_caps_text(keywords)}")


def smtp(ctx: Context, proto: str = "smtp", hello: bytes = b"EHLO") -> Dialogue:
    """SMTP (RFC 3207) and, with LHLO, LMTP (RFC 2033)."""
    code, lines = yield from _reply(proto, True, "the greeting")
    yield Note(banner=lines[0])
    if code != b"220":
        raise _refused_code(proto, "the session", code, _said(lines))
    yield Send(hello + b" " + ctx.client_name.encode("ascii", "replace") + b"\r\n")
    code, lines = yield from _reply(proto, False, f"the {hello.decode()} reply")
    if code != b"250":
        raise _hello_unknown(proto, hello.decode(), code, _said(lines)) or \
            _refused_code(proto, hello.decode(), code, _said(lines))
    keywords = [ln[4:].strip() for ln in lines[1:]]
    offered = [ln for ln in lines[1:] if ln[4:].strip().upper().split(b" ")[:1] == [b"STARTTLS"]]
    if not offered:
        raise _not_offered(proto, keywords, f"{hello.decode()} keywords")
    yield Note(capability=offered[0])
    yield Send(b"STARTTLS\r\n")
    code, lines = yield from _reply(proto, False, "the STARTTLS reply")
    if code != b"220":
        raise _refused_code(proto, "STARTTLS", code, _said(lines))


def lmtp(ctx: Context) -> Dialogue:
    return (yield from smtp(ctx, "lmtp", b"LHLO"))


def imap(ctx: Context) -> Dialogue:
    """IMAP (RFC 3501 6.2.1, RFC 2595): capabilities from the greeting or CAPABILITY."""
    greeting = yield Line("the greeting", re.compile(rb"\* "), 2)
    parts = greeting.split(b" ", 2)
    status = parts[1].upper() if len(parts) > 1 else b""
    if status not in (b"OK", b"PREAUTH", b"BYE"):
        raise not_speaking("imap", greeting)
    yield Note(banner=greeting)
    if status == b"BYE":
        raise _imap_bye("the session", greeting)
    if status != b"OK":
        raise _refused("imap", "STARTTLS (PREAUTH: already authenticated)", greeting)
    caps_line = greeting
    found = re.search(rb"\[CAPABILITY ([^\]]*)\]", greeting, re.IGNORECASE)
    if found is None:
        yield Send(b"a001 CAPABILITY\r\n")
        caps_line = b""
        while True:
            line = yield Line("the CAPABILITY reply")
            if line.upper().startswith(b"* CAPABILITY "):
                caps_line = line
            elif line.upper().startswith(b"* BYE"):
                raise _imap_bye("CAPABILITY", line)
            elif line.startswith(b"a001 "):
                break
        if not line[5:].upper().startswith(b"OK"):
            raise _imap_no("CAPABILITY", line)
        keywords = caps_line.split()[2:]
    else:
        keywords = found.group(1).split()
    if b"STARTTLS" not in (k.upper() for k in keywords):
        raise _not_offered("imap", keywords, "capabilities")
    yield Note(capability=caps_line)
    yield Send(b"a002 STARTTLS\r\n")
    while True:
        line = yield Line("the STARTTLS reply")
        if line.startswith(b"a002 "):
            break
        if line.upper().startswith(b"* BYE"):
            raise _imap_bye("STARTTLS", line)
    if not line[5:].upper().startswith(b"OK"):
        raise _imap_no("STARTTLS", line)


def _dot_list(waiting: str) -> Generator[Request, bytes, list[bytes]]:
    """The lines of a multi-line POP3/NNTP answer up to the lone '.' (value: the lines)."""
    lines: list[bytes] = []
    while True:
        line = yield Line(waiting)
        if line == b".":
            return lines
        lines.append(line[1:] if line.startswith(b"..") else line)


def pop3(ctx: Context) -> Dialogue:
    """POP3 (RFC 2595 4, RFC 2449 CAPA): STLS; a server without CAPA is asked anyway."""
    greeting = yield Line("the greeting", re.compile(rb"[+-]"), 1)
    if not greeting.startswith((b"+OK", b"-ERR")):
        raise not_speaking("pop3", greeting)
    yield Note(banner=greeting)
    if greeting.startswith(b"-ERR"):
        raise _pop3_err("the session", greeting)
    yield Send(b"CAPA\r\n")
    answer = yield Line("the CAPA reply")
    if answer.startswith(b"+OK"):
        keywords = yield from _dot_list("the CAPA list")
        if b"STLS" not in (k.split(b" ")[0].upper() for k in keywords):
            raise _not_offered("pop3", keywords, "CAPA list")
        yield Note(capability=next(k for k in keywords if k.split(b" ")[0].upper() == b"STLS"))
    elif not answer.startswith(b"-ERR"):
        raise PreambleFailure(Problem.MALFORMED, f"pop3: CAPA reply {quote(answer)}")
    yield Send(b"STLS\r\n")
    answer = yield Line("the STLS reply")
    if not answer.startswith(b"+OK"):
        raise _pop3_err("STLS", answer)


_FTP_TLS_FEATURES = (b"AUTH", b"PBSZ", b"PROT")


def ftp(ctx: Context) -> Dialogue:
    """FTP (RFC 4217): FEAT (RFC 2389) for the record, then AUTH TLS, answer 234. AUTH TLS is
    asked even when FEAT does not list it (vsftpd 3.0 lists it only with TLS 1.0 enabled);
    a rejection is "not offered" when the command is unknown or FEAT names none of AUTH,
    PBSZ, PROT (the FEAT list is then quoted), else a refusal. A rejection with an SMTP
    enhanced status code (or after an ESMTP greeting) names an SMTP or LMTP server, which
    shares FTP's 220 greeting."""
    code, lines = yield from _reply("ftp", True, "the greeting")
    while code == b"120":   # "service ready in nnn minutes": the 220 follows
        code, lines = yield from _reply("ftp", False, "the greeting")
    yield Note(banner=lines[0])
    if code != b"220":
        raise _refused_code("ftp", "the session", code, _said(lines))
    greeting = lines[0]
    yield Send(b"FEAT\r\n")
    code, lines = yield from _reply("ftp", False, "the FEAT reply")
    if code == b"421":   # closing the control connection (RFC 959 4.2): nothing follows
        raise busy("ftp", "FEAT", _said(lines))
    features = [ln.strip() for ln in lines[1:-1]] if code == b"211" else []
    replies = [] if features else lines
    auth = [f for f in features if f.upper().split(b" ")[:1] == [b"AUTH"]]
    if auth:
        yield Note(capability=auth[0])
    yield Send(b"AUTH TLS\r\n")
    code, lines = yield from _reply("ftp", False, "the AUTH TLS reply")
    evidence = _smtp_evidence(greeting, replies + lines) if code != b"234" else None
    if evidence is not None:
        raise PreambleFailure(Problem.WRONG_PROTOCOL, f"not speaking ftp: it sent SMTP or "
                              f"LMTP replies ({quote(evidence)}): {try_starttls('smtp or lmtp')}")
    if code[:1] == b"4":
        raise busy("ftp", "AUTH TLS", _said(lines))
    if code != b"234":
        tls_features = [f for f in features if f.upper().split(b" ")[0] in _FTP_TLS_FEATURES]
        if code in (b"500", b"502", b"504") or (features and not tls_features):
            raise PreambleFailure(Problem.NOT_OFFERED, f"ftp: AUTH TLS not offered: "
                                  f"{quote(_said(lines))}" + (f"; the server's FEAT list: "
                                                           f"{_caps_text(features)}"
                                                           if features else ""))
        raise _refused("ftp", "AUTH TLS", _said(lines))


def nntp(ctx: Context) -> Dialogue:
    """NNTP (RFC 4642, RFC 3977 CAPABILITIES): STARTTLS, answer 382."""
    greeting = yield Line("the greeting", _CODE3, 3)
    if not _CODE3.match(greeting):
        raise not_speaking("nntp", greeting)
    yield Note(banner=greeting)
    if greeting[:3] in (b"400", b"403"):
        raise busy("nntp", "the session", greeting)
    if greeting[:3] not in (b"200", b"201"):
        raise not_speaking("nntp", greeting) if greeting[:3] == b"220" else \
            _refused("nntp", "the session", greeting)
    yield Send(b"CAPABILITIES\r\n")
    answer = yield Line("the CAPABILITIES reply")
    if answer[:3] == b"101":
        keywords = yield from _dot_list("the CAPABILITIES list")
        offered = [k for k in keywords if k.split(b" ")[0].upper() == b"STARTTLS"]
        if not offered:
            raise _not_offered("nntp", keywords, "CAPABILITIES")
        yield Note(capability=offered[0])
    yield Send(b"STARTTLS\r\n")
    answer = yield Line("the STARTTLS reply")
    if answer[:3] in (b"400", b"403"):
        raise busy("nntp", "STARTTLS", answer)
    if answer[:3] != b"382":
        raise _refused("nntp", "STARTTLS", answer)


_SIEVE_STATUS = (b"OK", b"NO", b"BYE")


def _sieve_status(line: bytes) -> bytes | None:
    word = line.split(b" ", 1)[0].upper()
    return word if word in _SIEVE_STATUS else None


def _sieve_refused(what: str, line: bytes) -> PreambleFailure:
    """NO or BYE: temporary with the (TRYLATER) response code (RFC 5804 1.3)."""
    return busy("sieve", what, line) if re.match(rb"(?i)(NO|BYE) +\(TRYLATER", line) else \
        _refused("sieve", what, line)


def sieve(ctx: Context) -> Dialogue:
    """ManageSieve (RFC 5804 1.7, 2.2): the greeting lists capabilities, then OK."""
    lines: list[bytes] = []
    while True:
        line = yield Line("the greeting", re.compile(rb'["A-Za-z]'), 1)
        if _sieve_status(line):
            break
        if not line.startswith(b'"'):
            raise not_speaking("sieve", line)
        lines.append(line)
    yield Note(banner=lines[0] if lines else line)
    if _sieve_status(line) != b"OK":
        raise _sieve_refused("the session", line)
    names = [ln.split(b'"')[1] if ln.count(b'"') >= 2 else ln for ln in lines]
    offered = [ln for ln, n in zip(lines, names) if n.upper() == b"STARTTLS"]
    if not offered:
        raise _not_offered("sieve", names, "capabilities")
    yield Note(capability=offered[0])
    yield Send(b"STARTTLS\r\n")
    while True:
        line = yield Line("the STARTTLS reply")
        if _sieve_status(line):
            break
    if _sieve_status(line) != b"OK":
        raise _sieve_refused("STARTTLS", line)


_IRC_THROTTLED = re.compile(rb"(?i)throttl|too (?:fast|many)|try (?:again )?later")
_IRC_LINE = re.compile(rb"(?::\S+ +)?([A-Za-z]+|\d{3})(?: |$)")


def irc(ctx: Context) -> Dialogue:
    """IRC (IRCv3 tls): STARTTLS at once; 670 is the go-ahead, 691 a failure; notices and
    other lines before the answer are skipped (bounded by the line count)."""
    yield Send(b"STARTTLS\r\n")
    first = True
    while True:
        line = yield Line("the STARTTLS reply", re.compile(rb"[:A-Za-z]"), 1) if first else \
            Line("the STARTTLS reply")
        found = _IRC_LINE.match(line)
        if found is None:
            raise not_speaking("irc", line) if first else PreambleFailure(
                Problem.MALFORMED, f"irc: not an IRC line: {quote(line)}")
        if first:
            yield Note(banner=line)
        first = False
        command = found.group(1).upper()
        if command == b"670":
            yield Note(capability=line)
            return
        if command in (b"421", b"451"):
            raise PreambleFailure(Problem.NOT_OFFERED, f"irc: STARTTLS not offered: "
                                  f"{quote(line)}")
        if command == b"ERROR" and _IRC_THROTTLED.search(line):
            raise busy("irc", "the connection", line)
        if command in (b"691", b"ERROR") or command[:1] in (b"4", b"5"):
            raise _refused("irc", "STARTTLS", line)


TEXT_DIALOGUES: dict[str, Callable[[Context], Dialogue]] = {
    "smtp": smtp, "lmtp": lmtp, "imap": imap, "pop3": pop3, "ftp": ftp, "nntp": nntp,
    "sieve": sieve, "irc": irc,
}
