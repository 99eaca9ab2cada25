"""Start a throwaway local TLS server (openssl s_server on 127.0.0.1) and probe it.

For a first look without a network: the server offers TLS 1.2 only with X25519 and
ECDHE-RSA-AES128-GCM-SHA256 (the case the --msg trace is documented with), or TLS 1.3
with --tls1_3. The server and its self-signed certificate live in a temporary folder and
are removed afterwards.

--groups sets what the server allows and what the probe offers, and the server follows it:
in TLS 1.2 an FFDHE group means a DHE suite (DHE-RSA-AES128-GCM-SHA256) with that group's
RFC 7919 prime as -dhparam (s_server would otherwise pick its own prime), an EC group an
ECDHE one. A group the openssl binary cannot serve (X25519MLKEM768 before OpenSSL 3.5)
is one line and exit 2, as is a TLS 1.3-only group asked for in TLS 1.2, and an --openssl
that is missing or not openssl (the check `tlsprobe speed --openssl` makes).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tlsprobe.errors import UsageError
from tlsprobe.net.tcp import free_port

DEFAULT_GROUPS = "X25519"
ECDHE_SUITE = "ECDHE-RSA-AES128-GCM-SHA256"
DHE_SUITE = "DHE-RSA-AES128-GCM-SHA256"
# Group kinds that need a newer OpenSSL than many systems ship (3.5 added ML-KEM in TLS).
_PQ_KINDS = ("mlkem", "hybrid")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls1_3", action="store_true", help="serve TLS 1.3 (default: TLS 1.2)")
    p.add_argument("--groups", default=None, help="groups the demo server allows and the "
                   "probe offers, ':'-separated (OpenSSL spelling, e.g. ffdhe2048 or "
                   "X25519MLKEM768; default X25519 with the probe's own offer)")
    p.add_argument("--no-msg", action="store_true", help="print only the summary")
    p.add_argument("--openssl", default="openssl", help="openssl binary to serve with")


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
    """Whether the demo server listens on 127.0.0.1:`port` (the address it was told to
    accept on: a listener of another program on the same port at another address, e.g.
    [::1] or 0.0.0.0, is not it) before `timeout`."""
    end = time.monotonic() + timeout
    local = f"0100007F:{port:04X}"   # /proc/net/tcp's spelling of 127.0.0.1:port
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            with open("/proc/net/tcp") as fh:
                if any(fields[1] == local and fields[3] == "0A"
                       for fields in map(str.split, fh) if len(fields) > 3):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


@dataclass
class DemoPlan:
    """How to run the server and the probe for the requested groups and version."""

    server: list[str]
    probe: list[str]
    dhe_prime: int | None = None     # FFDHE group code served as -dhparam (TLS 1.2)
    problem: str | None = None       # a usage error to report once the server has started
    groups: list[tuple[str, int]] = field(default_factory=list)


def plan(groups_text: str | None, tls13: bool) -> DemoPlan:
    """The s_server options and probe arguments for --groups and --tls1_3."""
    # here: the parser imports no registry
    from tlsprobe.registry.parse import parse_group
    text = DEFAULT_GROUPS if groups_text is None else groups_text
    names = [name.strip() for name in re.split(r"[:,]", text) if name.strip()]
    if not names:
        raise UsageError("--groups: no group given")
    groups: list[tuple[str, int]] = []
    for name in names:
        try:
            groups.append((name, parse_group(name)))
        except ValueError as exc:
            raise UsageError(f"--groups: {exc}") from None
    from tlsprobe.requests.hello import once
    from tlsprobe.requests.names import CLI
    once(groups, "groups", CLI)    # (openssl refuses a repeat: not a missing capability)
    server = ["-groups", ":".join(names)]
    probe = ["--tls1_3" if tls13 else "--tls1_2"]
    if groups_text is not None:
        probe += ["--groups", ":".join(names)]
    if tls13:
        usable = [name for name, code in groups if _info(code, "tls13")]
        problem = None if usable else f"--groups {text}: no TLS 1.3 group"
        return DemoPlan(server + ["-tls1_3"], probe, None, problem, groups)
    suites: list[str] = []
    dhe_prime = None
    for _, code in groups:
        if not _info(code, "tls12"):
            continue
        if _info(code, "kind") == "ffdhe":
            suites.append(DHE_SUITE)
            dhe_prime = code if dhe_prime is None else dhe_prime
        else:
            suites.append(ECDHE_SUITE)
    suites = list(dict.fromkeys(suites))
    problem = None
    if not suites:
        only13 = ", ".join(name for name, code in groups if _info(code, "tls13"))
        problem = (f"{only13}: TLS 1.3 only; add --tls1_3" if only13
                   else f"--groups {text}: no group usable in TLS 1.2")
    server += ["-tls1_2", "-cipher", ":".join(suites or [ECDHE_SUITE])]
    if groups_text is not None and suites:
        probe += ["--ciphers", ":".join(suites)]
    return DemoPlan(server, probe, dhe_prime, problem, groups)


def _info(code: int, attribute: str) -> object:
    from tlsprobe.registry.lookup import group as group_info
    info = group_info(code)
    return None if info is None else getattr(info, attribute)


def _write_dhparam(openssl: str, folder: Path, code: int) -> Path:
    """The RFC 7919 prime of group `code` as a -dhparam file, written by the same openssl
    (`genpkey -genparam -pkeyopt group:ffdheNNNN`): s_server 3.0 refuses PKCS#3 parameters
    ("unexpected parameters type") and then silently serves its own 2048-bit prime."""
    name = str(_info(code, "name"))
    path = folder / "dhparam.pem"
    try:
        done = subprocess.run([openssl, "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt",
                               f"group:{name}", "-out", str(path)], capture_output=True,
                              text=True, timeout=30, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{openssl} genpkey could not write the {name} parameters: {exc}") \
            from None
    if done.returncode != 0 or not path.exists():
        line = next((x for x in done.stderr.splitlines() if x.strip()), "no output")
        raise UsageError(f"{openssl} cannot write the {name} parameters: {line.strip()}")
    return path


def _openssl_version(openssl: str) -> str:
    """'3.0' from `openssl version` (or its whole first line when it is not OpenSSL x.y)."""
    try:
        done = subprocess.run([openssl, "version"], capture_output=True, text=True, timeout=10,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "(unknown version)"
    line = (done.stdout.strip().splitlines() or ["(unknown version)"])[0]
    match = re.match(r"OpenSSL (\d+\.\d+)", line)
    return match.group(1) if match else line


def start_failure(stderr: str, demo: DemoPlan, openssl: str, explicit: bool) -> str:
    """One line saying why s_server did not start, naming a group it cannot serve."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    who = (f"{openssl} (openssl {_openssl_version(openssl)})" if explicit
           else f"the system openssl {_openssl_version(openssl)}")
    refused = re.search(r"group '([^']+)' cannot be set", stderr)
    names = [refused.group(1)] if refused else []
    if not names and any("groups" in line.lower() for line in lines):
        names = [name for name, _ in demo.groups]  # refused the list without naming one
    if names:
        kinds = {_info(code, "kind") for name, code in demo.groups if name in names}
        hint = "; try a server on OpenSSL 3.5+" if kinds & set(_PQ_KINDS) else ""
        return f"{who} cannot serve {', '.join(names)}{hint}"
    return "the demo server did not start: " + (lines[-1] if lines else "no listening socket")


def _openssl_binary(name: str) -> str:
    """The openssl to serve with, checked as `tlsprobe speed --openssl` checks it: a missing
    file, a non-executable or a program that is not openssl (/bin/true) is one line, exit 2,
    before a certificate is made or a server started."""
    from tlsprobe.speed import openssl as openssl_check
    if name == "openssl" and shutil.which(name) is None:
        raise UsageError("'openssl' not found: the demo serves with openssl s_server "
                         "(apt-get install openssl)")
    try:
        path, _ = openssl_check.check_binary(name)
    except openssl_check.OpensslUnusable as exc:
        raise UsageError(str(exc)) from None
    return path


def _probe(argv: list[str]) -> int:
    """`tlsprobe ARGV` (the probe command) in this process, while the server runs; its
    errors go up to cli.py as any command's do."""
    import time

    from tlsprobe.commands import probe as probe_command
    from tlsprobe.commands.common import command_parser
    args = command_parser(probe_command, "tlsprobe").parse_intermixed_args(argv)
    args.started = time.monotonic()
    return probe_command.run(args)


def run(args: argparse.Namespace) -> int:
    openssl = _openssl_binary(args.openssl)
    demo = plan(args.groups, args.tls1_3)
    with tempfile.TemporaryDirectory(prefix="tlsprobe-demo-") as tmp:
        cert, key = _self_signed(Path(tmp))
        port = free_port()
        argv = [openssl, "s_server", "-accept", f"127.0.0.1:{port}", "-cert", str(cert),
                "-key", str(key), "-www", *demo.server]
        if demo.dhe_prime is not None:
            argv += ["-dhparam", str(_write_dhparam(openssl, Path(tmp), demo.dhe_prime))]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            if not _wait_listening(port, proc):
                err = proc.stderr.read().decode(errors="replace") \
                    if proc.stderr and proc.poll() is not None else ""
                raise UsageError(start_failure(err, demo, openssl,
                                               args.openssl != "openssl"))
            if demo.problem:
                raise UsageError(demo.problem)
            print(f"# demo server: {' '.join(os.path.basename(a) if a == openssl else a for a in argv)}")
            probe = [f"127.0.0.1:{port}", *demo.probe]
            if not args.no_msg:
                probe.append("--msg")
            print(f"# tlsprobe {' '.join(probe)}", flush=True)
            return _probe(probe)
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stderr is not None:  # else a ResourceWarning (unclosed file) at exit
                proc.stderr.close()
