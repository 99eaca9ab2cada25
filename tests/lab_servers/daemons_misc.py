"""FTP, XMPP and LDAP recipes for daemons.py: vsftpd (AUTH TLS), Prosody (XMPP c2s and s2s
STARTTLS) and OpenLDAP slapd (StartTLS extended operation).

vsftpd and slapd run as root in the foreground; Prosody runs as its `prosody` user (it will
not run as root) with a Lua configuration in the test's folder.
"""
from __future__ import annotations

import os
from pathlib import Path

from tests.lab_servers.certs import CertSet
from tests.lab_servers.daemons import (Launch, Recipe, copy_identity, free_ports, hand_to, require,
                                 traversable)


def vsftpd(workdir: Path, certs: CertSet, *, starttls: bool = True, kind: str = "rsa",
           max_per_ip: int = 0, extra: tuple[str, ...] = ()) -> Launch:
    """vsftpd on a free port; `starttls` False: ssl_enable=NO (no AUTH TLS in FEAT). It has
    no group option: vsftpd 3.0.3 sets P-256 as its one ECDHE group in the code (not
    OpenSSL's default list), which its group audit must find. `max_per_ip` N > 0: a client
    address with N connections open gets "421 There are too many connections from your
    internet address." on the next (a temporary refusal). `extra`: more vsftpd.conf lines
    (a later line overrides an earlier one)."""
    binary = require("/usr/sbin/vsftpd", "vsftpd")
    cert, key, _ = copy_identity(certs, kind, workdir / "tls")
    empty = workdir / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    os.chmod(empty, 0o755)
    (port,) = free_ports(1)
    log = workdir / "vsftpd.log"
    lines = ["listen=YES", "listen_ipv6=NO", "listen_address=127.0.0.1", f"listen_port={port}",
             "background=NO", "anonymous_enable=NO", "local_enable=YES",
             f"secure_chroot_dir={empty}", "seccomp_sandbox=NO", f"vsftpd_log_file={log}",
             "xferlog_enable=YES", "pasv_enable=NO", "pam_service_name=vsftpd",
             f"ssl_enable={'YES' if starttls else 'NO'}", f"max_per_ip={max_per_ip}"]
    if starttls:
        lines += [f"rsa_cert_file={cert}", f"rsa_private_key_file={key}", "ssl_tlsv1=NO",
                  "ssl_sslv2=NO", "ssl_sslv3=NO", "require_ssl_reuse=NO"]
    lines += extra
    (workdir / "vsftpd.conf").write_text("\n".join(lines) + "\n")
    return Launch([binary, str(workdir / "vsftpd.conf")], {"ftp": port}, [log])


def prosody(workdir: Path, certs: CertSet, *, starttls: bool = True, kind: str = "rsa",
            curves: str | None = None, extra: tuple[str, ...] = ()) -> Launch:
    """Prosody for the host "localhost": c2s ("xmpp") and s2s ("xmpp-server") on free
    ports; `starttls` False: the tls module is not loaded (no <starttls/> feature). `extra`:
    more global Lua lines (they override the ones above, e.g. "c2s_require_encryption = true")."""
    binary = require("/usr/bin/prosody", "prosody")
    cert, key, _ = copy_identity(certs, kind, workdir / "tls")
    c2s, s2s = free_ports(2)
    log = workdir / "prosody.log"
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    modules = ['"tls"', '"saslauth"', '"dialback"', '"disco"'] if starttls else \
        ['"saslauth"', '"dialback"', '"disco"']
    # `curves`: LuaSec's curveslist (OpenSSL group names, e.g. "P-384") instead of Prosody's
    # default list
    curveslist = f' curveslist = {{ "{curves}" }};' if curves else ""
    more = "".join(f"{line}\n" for line in extra)
    text = f"""pidfile = "{workdir / 'prosody.pid'}"
data_path = "{data}"
interfaces = {{ "127.0.0.1" }}
c2s_ports = {{ {c2s} }}
s2s_ports = {{ {s2s} }}
c2s_direct_tls_ports = {{ }}
s2s_direct_tls_ports = {{ }}
legacy_ssl_ports = {{ }}
http_ports = {{ }}
https_ports = {{ }}
component_ports = {{ }}
log = {{ debug = "{log}" }}
modules_enabled = {{ {", ".join(modules)} }}
modules_disabled = {{ "s2s_bidi", "posix" }}
plugin_paths = {{ }}
authentication = "internal_plain"
c2s_require_encryption = false
s2s_require_encryption = false
certificates = "{workdir / 'certs-unused'}"
ssl = {{ certificate = "{cert}"; key = "{key}";{curveslist} }}
{more}VirtualHost "localhost"
"""
    (workdir / "prosody.cfg.lua").write_text(text)
    hand_to("prosody", workdir)
    return Launch(["runuser", "-u", "prosody", "--", binary, "-F", "--config",
                   str(workdir / "prosody.cfg.lua")], {"xmpp": c2s, "xmpp-server": s2s}, [log])


def slapd(workdir: Path, certs: CertSet, *, starttls: bool = True, kind: str = "rsa",
          curves: str | None = None, extra: tuple[str, ...] = ()) -> Launch:
    """slapd with an empty mdb database; `starttls` False: no TLS certificate configured.
    `curves`: the one GnuTLS group allowed (Debian's slapd uses GnuTLS: TLSCipherSuite is a
    priority string), e.g. "SECP384R1". `extra`: more global slapd.conf lines, e.g.
    ("TLSProtocolMin 3.4",)."""
    binary = require("/usr/sbin/slapd", "slapd")
    cert, key, chain = copy_identity(certs, kind, workdir / "tls")
    db = workdir / "db"
    db.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    tls = f"TLSCertificateFile {cert}\nTLSCertificateKeyFile {key}\n" \
          f"TLSCACertificateFile {certs.ca}\n" if starttls else ""
    if starttls and curves:
        tls += f"TLSCipherSuite NORMAL:-GROUP-ALL:+GROUP-{curves}\n"
    tls += "".join(f"{line}\n" for line in extra)
    text = f"""include /etc/ldap/schema/core.schema
pidfile {workdir / 'slapd.pid'}
argsfile {workdir / 'slapd.args'}
modulepath /usr/lib/ldap
moduleload back_mdb
{tls}database mdb
maxsize 10485760
suffix "dc=test,dc=invalid"
rootdn "cn=admin,dc=test,dc=invalid"
directory {db}
"""
    (workdir / "slapd.conf").write_text(text)
    traversable(workdir / "slapd.conf")
    _ = chain
    return Launch([binary, "-d", "0", "-h", f"ldap://127.0.0.1:{port}/", "-f",
                   str(workdir / "slapd.conf")], {"ldap": port}, [])


RECIPES: dict[str, Recipe] = {"vsftpd": vsftpd, "prosody": prosody, "slapd": slapd}
