"""Mail recipes for daemons.py: Postfix (smtp and submission) and Dovecot (imap, pop3,
ManageSieve, lmtp), each from a configuration written into the test's folder.

Postfix runs its master in the foreground (`master -d -c DIR`) with its own queue and
data folders and a master.cf derived from Debian's (every service unchrooted, the smtp
listener replaced by ours). Dovecot runs `dovecot -F -c FILE` with its own base folder.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.lab_servers.certs import CertSet
from tests.lab_servers.daemons import (Launch, Recipe, copy_identity, free_ports, hand_to,
                                 require)


def postfix(workdir: Path, certs: CertSet, *, starttls: bool = True, curves: str | None = None,
            kind: str = "rsa", extra: tuple[tuple[str, str], ...] = ()) -> Launch:
    """smtpd on two free ports: "smtp" (STARTTLS offered, or not with `starttls` False) and
    "submission" (TLS required). `curves`: tls_eecdh_auto_curves; `extra`: more main.cf
    (name, value) settings, e.g. (("smtpd_tls_protocols", ">=TLSv1.3"),)."""
    postfix_bin = require("/usr/sbin/postfix", "postfix")
    conf = workdir / "etc"
    conf.mkdir(parents=True, exist_ok=True)
    (workdir / "data").mkdir(exist_ok=True)
    cert, key, chain = copy_identity(certs, kind, workdir / "tls")
    smtp_port, submission_port = free_ports(2)
    log = workdir / "postfix.log"
    main = {
        "compatibility_level": "3.6", "myhostname": "mx.test.invalid",
        "mydestination": "", "inet_interfaces": "127.0.0.1", "inet_protocols": "ipv4",
        "queue_directory": str(workdir / "queue"), "data_directory": str(workdir / "data"),
        "mail_owner": "postfix", "setgid_group": "postdrop", "maillog_file": str(log),
        "maillog_file_prefixes": str(workdir),
        "smtpd_tls_chain_files": f"{key}, {chain}",
        "smtpd_tls_security_level": "may" if starttls else "none",
        "smtpd_banner": "$myhostname ESMTP tlsprobe-test", "biff": "no",
        "alias_maps": "", "alias_database": "", "local_recipient_maps": "",
    }
    if curves:
        main["tls_eecdh_auto_curves"] = curves
    main.update(extra)
    (conf / "main.cf").write_text("".join(f"{k} = {v}\n" for k, v in main.items()))
    master_cf = Path("/etc/postfix/master.cf").read_text()
    kept = [ln for ln in master_cf.splitlines()
            if not re.match(r"#?\s*(smtp|submission|submissions|smtps)\s+inet\b", ln)]
    out = []
    for ln in kept:   # service type private unpriv chroot wakeup maxproc command
        fields = ln.split()
        if len(fields) >= 8 and not ln.startswith((" ", "\t", "#")) and fields[4] == "y":
            fields[4] = "n"
            ln = " ".join(fields)
        out.append(ln)
    out.append(f"127.0.0.1:{smtp_port} inet n - n - - smtpd")
    out.append(f"127.0.0.1:{submission_port} inet n - n - - smtpd "
               "-o smtpd_tls_security_level=encrypt")
    (conf / "master.cf").write_text("\n".join(out) + "\n")
    _ = cert
    (workdir / "queue").mkdir(exist_ok=True)
    hand_to("postfix", workdir / "data")
    subprocess.run([postfix_bin, "-c", str(conf), "set-permissions", "create-missing"],
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=True)
    # The master itself, not `postfix start-fg`: that master calls setsid() and would leave
    # our process group; with -d it stays in it (and in the foreground).
    master = require("/usr/lib/postfix/sbin/master", "postfix")
    return Launch([master, "-d", "-c", str(conf)],
                  {"smtp": smtp_port, "submission": submission_port}, [log],
                  env={**os.environ, "MAIL_CONFIG": str(conf)})


def dovecot(workdir: Path, certs: CertSet, *, starttls: bool = True,
            curves: str | None = None, kind: str = "rsa", extra: tuple[str, ...] = ()) -> Launch:
    """imap, pop3, sieve and lmtp on free ports; `starttls` False: ssl = no. `extra`: more
    top-level settings, e.g. ("ssl_min_protocol = TLSv1.3",)."""
    dovecot_bin = require("/usr/sbin/dovecot", "dovecot-imapd dovecot-pop3d "
                          "dovecot-managesieved dovecot-lmtpd")
    cert, key, _ = copy_identity(certs, kind, workdir / "tls")
    imap_port, pop3_port, sieve_port, lmtp_port = free_ports(4)
    run = workdir / "run"
    run.mkdir(parents=True, exist_ok=True)
    log = workdir / "dovecot.log"
    ssl = f"""ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
""" if starttls else "ssl = no\n"
    if curves and starttls:
        ssl += f"ssl_curve_list = {curves}\n"
    ssl += "".join(f"{line}\n" for line in extra)
    text = f"""base_dir = {run}
state_dir = {workdir / 'state'}
log_path = {log}
protocols = imap pop3 sieve lmtp
listen = 127.0.0.1
{ssl}disable_plaintext_auth = no
auth_mechanisms = plain
passdb {{
  driver = static
  args = password=test
}}
userdb {{
  driver = static
  args = uid=nobody gid=nogroup home={workdir}/home/%u
}}
mail_location = maildir:{workdir}/home/%u/Maildir
service imap-login {{
  inet_listener imap {{
    port = {imap_port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service pop3-login {{
  inet_listener pop3 {{
    port = {pop3_port}
  }}
  inet_listener pop3s {{
    port = 0
  }}
}}
service managesieve-login {{
  inet_listener sieve {{
    port = {sieve_port}
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
}}
protocol lmtp {{
  postmaster_address = postmaster@test.invalid
}}
"""
    (workdir / "dovecot.conf").write_text(text)
    return Launch([dovecot_bin, "-F", "-c", str(workdir / "dovecot.conf")],
                  {"imap": imap_port, "pop3": pop3_port, "sieve": sieve_port,
                   "lmtp": lmtp_port}, [log])


RECIPES: dict[str, Recipe] = {"postfix": postfix, "dovecot": dovecot}
