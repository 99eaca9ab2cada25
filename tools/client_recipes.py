"""The recipes of tools/record_clients.py: how each locally installable client is made to
connect to `https://localhost:PORT/`, how its version and TLS library are read, and which
trust store it uses.

Each command is the client's ordinary way of fetching a URL, with its defaults: certificate
verification is left on where turning it off is a separate option (the hello is sent before
any certificate is seen, and some clients change their hello with such options, e.g. Python's
http.client offers ALPN only with its default context). Only what keeps a client from using
the user's configuration or the network is added (a fresh HOME, a throwaway browser profile,
the browsers' background-networking switches).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tlsprobe.model.clients import TrustStore

#: a name with a dot for the clients that send no SNI for `localhost`; tools/record_clients.py
#: maps it to 127.0.0.1 in its mount namespace's /etc/hosts (.test is reserved, RFC 2606)
DOTTED_HOST = "client-record.test"

__all__ = ["DOTTED_HOST", "RECIPES", "Facts", "Recipe", "Run", "describe", "platform_name", "platform_tag"]


@dataclass(frozen=True)
class Run:
    """What a recipe's command is made from: the listener's port and URL, a temporary
    folder for the client's files, the client's program as found."""

    port: int
    url: str
    tmp: Path
    binary: str


@dataclass(frozen=True)
class Recipe:
    key: str                          # the --only name
    client: str                       # the client's name in the profile
    package: str                      # what brings it (a Debian package, or how else)
    binary: str                       # program on PATH, absolute path, or $ENVVAR naming one
    command: Callable[[Run], list[str]]
    version_cmd: tuple[str, ...]      # "{bin}" stands for the program found
    version_re: str                   # group 1: the client's version; (?P<lib>): its library's
    library: str                      # "linked" (ldd + dpkg; "linked:PATH" for another
                                      # program), "bundled-nss:PATH" (the NSS a program
                                      # ships), or a template with {lib}, {version}
    ident: str                        # profile id: {v1} {v2} (client), {lib2} (library), {plat}
    trust: TrustStore
    notes: str = ""
    timeout: float = 40.0
    host: str = "localhost"           # the name in the URL (DOTTED_HOST where a client
                                      # sends SNI only for a name with a dot)


@dataclass(frozen=True)
class Facts:
    """A client's version, library and profile id as read on this machine."""

    binary: str
    version: str
    library: str
    id: str


def _os_release() -> dict[str, str]:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return {}
    return {k: v.strip('"') for k, _, v in (ln.partition("=") for ln in text.splitlines()) if k}


def platform_name() -> str:
    """"Debian 12, x86_64": the distribution's name and release, the machine's architecture."""
    rel = _os_release()
    name = rel.get("NAME", "Linux").replace(" GNU/Linux", "")
    return f"{name} {rel.get('VERSION_ID', '')}".strip() + f", {platform.machine()}"


def platform_tag() -> str:
    """"debian12": the profile id suffix."""
    rel = _os_release()
    return re.sub(r"[^a-z0-9]", "", (rel.get("ID", "linux") + rel.get("VERSION_ID", "")).lower())


def _deb_version(package: str) -> str | None:
    """The upstream version of an installed Debian package (no epoch, no revision)."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                             check=False, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout:
        return None
    return out.stdout.split(":")[-1].split("-")[0].split("+")[0]


_LINKED = (("libssl.so.3", "OpenSSL", "libssl3"), ("libgnutls.so.30", "GnuTLS", "libgnutls30"),
           ("libnss3.so", "NSS", "libnss3"), ("libbotan-2.so", "Botan", "libbotan-2-19"))


def linked_library(binary: str) -> str:
    """The TLS library `binary` is linked with (ldd), with its Debian package's version."""
    try:
        out = subprocess.run(["ldd", binary], check=False, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    libs = []
    if "libcurl-gnutls.so" in out:
        libs.append(f"libcurl {_deb_version('libcurl3-gnutls') or '?'}")
    for soname, name, package in _LINKED:
        if soname in out:
            libs.append(f"{name} {_deb_version(package) or '?'}")
    return ", ".join(libs) or "unknown"


def bundled_nss(path: str) -> str:
    """The version of the NSS a program ships (its libnss3.so names it: "Version: NSS 3.x")."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return "NSS (bundled)"
    found = re.search(rb"Version: NSS (\d+\.\d+(?:\.\d+)?)", data)
    return f"NSS {found.group(1).decode()} (bundled)" if found else "NSS (bundled)"


def _find(binary: str) -> str | None:
    if binary.startswith("$"):
        binary = os.environ.get(binary[1:], "")
        if not binary:
            return None
    found = shutil.which(binary)
    return found if found else None


def describe(recipe: Recipe, tag: str) -> Facts | str:
    """The client's facts, or why it cannot be run here (a sentence)."""
    binary = _find(recipe.binary)
    if binary is None:
        return f"not installed (it comes with {recipe.package})"
    argv = [a.replace("{bin}", binary) for a in recipe.version_cmd]
    try:
        out = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"its version could not be read ({exc})"
    match = re.search(recipe.version_re, out.stdout + out.stderr, re.MULTILINE)
    if match is None:
        text = (out.stdout + out.stderr).strip()[-200:]
        return f"not usable: {' '.join(argv)!r} printed {text!r} (it comes with {recipe.package})"
    version = match.group(1)
    lib = match.groupdict().get("lib") or ""
    if recipe.library.startswith("bundled-nss:"):
        library = bundled_nss(recipe.library.partition(":")[2])
    elif recipe.library.startswith("linked"):
        library = linked_library(recipe.library.partition(":")[2] or binary)
    else:
        library = recipe.library.format(lib=lib, version=version)
    lib2 = ".".join(re.findall(r"\d+", library)[:2])
    v = re.findall(r"\d+", version)
    ident = recipe.ident.format(v1=v[0], v2=".".join(v[:2]), lib2=lib2, plat=tag)
    return Facts(binary, version, library, ident)


# -- the files some clients need -----------------------------------------------------------

def _write(run: Run, name: str, text: str) -> str:
    path = run.tmp / name
    path.write_text(text)
    return str(path)


#: Firefox: no first-run pages, telemetry, updates, remote settings, captive-portal or
#: connectivity probes, DNS over HTTPS, safe browsing or add-on updates; and every proxied
#: connection (anything but localhost) sent to a closed loopback port. The network namespace
#: already confines the browser to loopback: these keep it from trying.
FIREFOX_PREFS = {
    "browser.shell.checkDefaultBrowser": False, "browser.startup.page": 0,
    "browser.aboutwelcome.enabled": False, "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False, "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.unified": False, "app.update.enabled": False, "app.update.auto": False,
    "app.normandy.enabled": False, "services.settings.server": "http://127.0.0.1:9/",
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False, "network.trr.mode": 5,
    "browser.safebrowsing.malware.enabled": False, "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False, "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False, "browser.search.update": False,
    "media.gmp-manager.url": "http://127.0.0.1:9/", "network.dns.disablePrefetch": True,
    "network.prefetch-next": False, "browser.newtabpage.enabled": False,
    "network.proxy.type": 1, "network.proxy.http": "127.0.0.1", "network.proxy.http_port": 9,
    "network.proxy.ssl": "127.0.0.1", "network.proxy.ssl_port": 9,
    "network.proxy.no_proxies_on": "localhost, 127.0.0.1, ::1",
    "network.proxy.allow_hijacking_localhost": False,
}


def _firefox(run: Run) -> list[str]:
    profile = run.tmp / "profile"
    profile.mkdir()
    lines = [f"user_pref({_js(k)}, {_js(v)});" for k, v in FIREFOX_PREFS.items()]
    (profile / "user.js").write_text("\n".join(lines) + "\n")
    return [run.binary, "--headless", "--no-remote", "--profile", str(profile),
            "--screenshot", str(run.tmp / "page.png"), run.url]


def _js(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return '"' + str(value) + '"'


def _chromium(run: Run) -> list[str]:
    return [run.binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={run.tmp / 'chromium'}", "--dump-dom", run.url]


JAVA = """import java.net.URL;
import javax.net.ssl.HttpsURLConnection;

public class Get {
    public static void main(String[] args) throws Exception {
        HttpsURLConnection c = (HttpsURLConnection) new URL(args[0]).openConnection();
        c.setConnectTimeout(20000);
        c.setReadTimeout(20000);
        System.out.println(c.getResponseCode());
    }
}
"""

GO = """package main

import (
\t"fmt"
\t"net/http"
\t"os"
)

func main() {
\tresp, err := http.Get(os.Args[1])
\tfmt.Println(resp, err)
}
"""

PYOPENSSL = """import socket, sys
from OpenSSL import SSL
host, port = sys.argv[1], int(sys.argv[2])
conn = SSL.Connection(SSL.Context(SSL.TLS_CLIENT_METHOD), socket.create_connection((host, port)))
conn.set_tlsext_host_name(host.encode())
conn.set_connect_state()
conn.do_handshake()
"""

TLSLITE = """import socket, sys
from tlslite.api import TLSConnection
host, port = sys.argv[1], int(sys.argv[2])
conn = TLSConnection(socket.create_connection((host, port)))
conn.handshakeClientCert(serverName=host)
"""

ERLANG = ('application:ensure_all_started(ssl), application:ensure_all_started(inets), '
          'io:format("~p~n", [httpc:request(get, {"URL", []}, [], [])]), halt().')


def _script(name: str, text: str, *pre: str) -> Callable[[Run], list[str]]:
    """A command that runs a script file written into the temporary folder."""
    def command(run: Run) -> list[str]:
        path = _write(run, name, text)
        return [run.binary, *pre, path, *(["localhost", str(run.port)] if name.endswith(".py")
                                          else [run.url])]
    return command


def _argv(*parts: str) -> Callable[[Run], list[str]]:
    """A fixed command: "{bin}", "{url}", "{port}" and "{tmp}" are filled in."""
    def command(run: Run) -> list[str]:
        return [p.format(bin=run.binary, url=run.url, port=run.port, tmp=run.tmp)
                for p in parts]
    return command


_S, _M, _C, _J = TrustStore.system, TrustStore.mozilla, TrustStore.chrome, TrustStore.java
_PY = sys.executable
_V = r"([\d.]+)"

#: In the order in which duplicates are resolved: a later client sending the same hello as an
#: earlier one is named in the earlier one's notes instead of getting a profile.
RECIPES: tuple[Recipe, ...] = (
    Recipe("chromium", "Chromium", "Debian package chromium", "chromium", _chromium,
           ("{bin}", "--version"), r"Chromium " + _V, "BoringSSL (built into Chromium)",
           "chromium-{v1}-{plat}", _C, "headless (--dump-dom), background networking off"),
    Recipe("firefox-esr", "Firefox ESR", "Debian package firefox-esr", "firefox-esr", _firefox,
           ("{bin}", "--version"), r"Firefox ([\d.]+)esr",
           "bundled-nss:/usr/lib/firefox-esr/libnss3.so",
           "firefox-esr-{v1}-{plat}", _M,
           "headless (--screenshot) with a throwaway profile whose user.js turns off "
           "background connections and DNS over HTTPS (network.trr.mode 5)"),
    Recipe("curl", "curl", "Debian package curl", "curl",
           _argv("{bin}", "-s", "-o", "/dev/null", "{url}"),
           ("{bin}", "--version"), r"^curl " + _V + r".*OpenSSL/(?P<lib>[\d.]+)", "OpenSSL {lib}",
           "curl-{v2}-openssl-{lib2}-{plat}", _S),
    Recipe("wget", "GNU Wget", "Debian package wget", "wget",
           _argv("{bin}", "-q", "-t", "1", "-O", "/dev/null", "{url}"),
           ("{bin}", "--version"), r"GNU Wget " + _V, "linked", "wget-{v2}-gnutls-{lib2}-{plat}",
           _S),
    Recipe("python", "Python urllib", "Debian package python3", "/usr/bin/python3",
           _argv("{bin}", "-c", "import sys, urllib.request; urllib.request.urlopen(sys.argv[1])",
                 "{url}"),
           ("{bin}", "-c", "import sys, ssl; print(sys.version.split()[0], ssl.OPENSSL_VERSION)"),
           r"^([\d.]+) OpenSSL (?P<lib>[\d.]+)", "OpenSSL {lib}",
           "python-{v2}-urllib-openssl-{lib2}-{plat}", _S,
           "urllib.request.urlopen with its default context (http.client offers ALPN "
           "http/1.1 then)"),
    Recipe("openssl", "openssl s_client", "Debian package openssl", "openssl",
           _argv("{bin}", "s_client", "-connect", "localhost:{port}", "-servername", "localhost"),
           ("{bin}", "version"), r"OpenSSL " + _V, "OpenSSL {version}", "openssl-{v2}-{plat}", _S,
           "s_client sends SNI by itself for a host name with a dot; for 'localhost' it takes "
           "-servername, so that the profile carries SNI as for any host"),
    Recipe("gnutls-cli", "gnutls-cli", "Debian package gnutls-bin", "gnutls-cli",
           _argv("{bin}", "-p", "{port}", "localhost"),
           ("{bin}", "--version"), r"gnutls-cli " + _V, "linked", "gnutls-cli-{v2}-{plat}", _S),
    Recipe("python-requests", "Python requests", "Debian package python3-requests",
           "/usr/bin/python3",
           _argv("{bin}", "-c", "import sys, requests; requests.get(sys.argv[1])", "{url}"),
           ("{bin}", "-c", ("import ssl, requests, urllib3; print(requests.__version__, "
                            "urllib3.__version__, ssl.OPENSSL_VERSION)")),
           r"^([\d.]+) [\d.]+ OpenSSL (?P<lib>[\d.]+)", "OpenSSL {lib} (urllib3, Python ssl)",
           "python-requests-{v2}-openssl-{lib2}-{plat}", _S,
           "Debian's requests and urllib3 1.26 on Python 3.11"),
    Recipe("pyopenssl", "pyOpenSSL", "pip package pyOpenSSL (the OpenSSL inside cryptography)",
           _PY, _script("pyopenssl_get.py", PYOPENSSL),
           ("{bin}", "-c", ("import OpenSSL; from OpenSSL import SSL; print(OpenSSL.__version__,"
                            " SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode())")),
           r"^([\d.]+) OpenSSL (?P<lib>[\d.]+)", "OpenSSL {lib} (in cryptography's wheel)",
           "pyopenssl-{v1}-openssl-{lib2}-{plat}", _S,
           "a plain SSL.Context(TLS_CLIENT_METHOD) with SNI: the library's defaults"),
    Recipe("java", "OpenJDK HttpsURLConnection", "Debian package default-jre-headless", "java",
           _script("Get.java", JAVA), ("{bin}", "-version"), r'version "' + _V,
           "SunJSSE (OpenJDK)", "openjdk-{v1}-{plat}", _J,
           "java Get.java URL: HttpsURLConnection with the JDK's defaults; JSSE sends no SNI "
           f"for a host name without a dot such as localhost, so the URL names {DOTTED_HOST}",
           host=DOTTED_HOST),
    Recipe("go", "Go net/http", "Debian package golang-go", "go", _script("get.go", GO, "run"),
           ("{bin}", "version"), r"go version go" + _V, "Go crypto/tls", "go-{v2}-{plat}", _S,
           "http.Get with the default transport"),
    Recipe("node", "Node.js https", "Debian package nodejs", "node",
           _argv("{bin}", "-e", "require('https').get(process.argv[1]).on('error', e => "
                 "console.error(e.message))", "{url}"),
           ("{bin}", "-p", "process.versions.node + ' ' + process.versions.openssl"),
           r"^([\d.]+) (?P<lib>[\d.]+)", "OpenSSL {lib} (in Node.js)",
           "nodejs-{v1}-{plat}", _M, "https.get with the defaults (Node's CA store is "
           "Mozilla's roots, compiled in)"),
    Recipe("node24", "Node.js https", "the npm package node@24 (npm install node@24; "
           "then set NODE24 to node_modules/node/bin/node)", "$NODE24",
           _argv("{bin}", "-e", "require('https').get(process.argv[1]).on('error', e => "
                 "console.error(e.message))", "{url}"),
           ("{bin}", "-p", "process.versions.node + ' ' + process.versions.openssl"),
           r"^([\d.]+) (?P<lib>[\d.]+)", "OpenSSL {lib} (in Node.js)",
           "nodejs-{v1}-{plat}", _M, "the official Node.js build from the npm registry's "
           "node package; https.get with the defaults"),
    Recipe("lynx", "Lynx", "Debian package lynx", "lynx", _argv("{bin}", "-dump", "{url}"),
           ("{bin}", "-version"), r"Lynx Version ([\w.]+)", "linked",
           "lynx-{v2}-{plat}", _S),
    Recipe("w3m", "w3m", "Debian package w3m", "w3m", _argv("{bin}", "-dump", "{url}"),
           ("{bin}", "-version"), r"w3m version w3m/([\w.+]+)", "linked", "w3m-{v2}-{plat}", _S),
    Recipe("elinks", "ELinks", "Debian package elinks", "elinks",
           _argv("{bin}", "-dump", "{url}"), ("{bin}", "--version"), r"ELinks " + _V, "linked",
           "elinks-{v2}-{plat}", _S),
    Recipe("links2", "Links", "Debian package links2", "links2",
           _argv("{bin}", "-dump", "{url}"), ("{bin}", "-version"), r"Links " + _V, "linked",
           "links-{v2}-{plat}", _S),
    Recipe("aria2c", "aria2", "Debian package aria2", "aria2c",
           _argv("{bin}", "-d", "{tmp}", "--max-tries=1", "--async-dns=false", "{url}"),
           ("{bin}", "--version"), r"aria2 version " + _V, "linked", "aria2-{v2}-{plat}", _S,
           "--async-dns=false: its c-ares resolver finds no address without a name server; "
           f"aria2 sends no SNI for a host name without a dot, so the URL names {DOTTED_HOST}",
           host=DOTTED_HOST),
    Recipe("tstclnt", "NSS tstclnt", "Debian package libnss3-tools", "tstclnt",
           _argv("{bin}", "-D", "-h", "localhost", "-p", "{port}"),
           ("dpkg-query", "-W", "-f", "${Version}\\n", "libnss3-tools"),
           r"^(?:\d+:)?([\d.]+)", "linked", "nss-tstclnt-{v2}-{plat}", _M,
           "NSS's test client with its defaults, run without a certificate database (-D)"),
    Recipe("wget2", "GNU Wget2", "Debian package wget2", "wget2",
           _argv("{bin}", "-q", "-t", "1", "-O", "/dev/null", "{url}"),
           ("{bin}", "--version"), r"GNU Wget2 " + _V, "linked", "wget2-{v2}-{plat}", _S),
    Recipe("lftp", "lftp", "Debian package lftp", "lftp",
           _argv("{bin}", "-c", "set net:max-retries 1; cat {url}"),
           ("{bin}", "--version"), r"Version " + _V, "linked", "lftp-{v2}-{plat}", _S),
    Recipe("git", "git (https)", "Debian package git", "git",
           _argv("{bin}", "ls-remote", "{url}repo.git"),
           ("{bin}", "--version"), r"git version " + _V,
           "linked:/usr/lib/git-core/git-remote-https", "git-{v2}-{plat}", _S,
           "git ls-remote over https: git-remote-https, libcurl built with GnuTLS"),
    Recipe("perl-lwp", "Perl LWP::UserAgent", "Debian packages libwww-perl and "
           "liblwp-protocol-https-perl", "perl",
           _argv("{bin}", "-MLWP::UserAgent", "-e", "print LWP::UserAgent->new->get(shift)"
                 "->status_line", "{url}"),
           ("{bin}", "-MLWP::UserAgent", "-MLWP::Protocol::https", "-MNet::SSLeay", "-e",
            ("printf qq{%s %s\\n}, $LWP::UserAgent::VERSION, "
             "Net::SSLeay::SSLeay_version(Net::SSLeay::SSLEAY_VERSION())")),
           r"^([\d.]+) OpenSSL (?P<lib>[\d.]+)", "OpenSSL {lib} (IO::Socket::SSL)",
           "perl-lwp-{v2}-openssl-{lib2}-{plat}", _S),
    Recipe("ruby", "Ruby Net::HTTP", "Debian package ruby", "ruby",
           _argv("{bin}", "-rnet/http", "-e", "Net::HTTP.get(URI(ARGV[0]))", "{url}"),
           ("{bin}", "-ropenssl", "-e", ("puts RUBY_VERSION + ' ' + "
                                         "OpenSSL::OPENSSL_LIBRARY_VERSION")),
           r"^([\d.]+) OpenSSL (?P<lib>[\d.]+)", "OpenSSL {lib}",
           "ruby-{v2}-openssl-{lib2}-{plat}", _S),
    Recipe("php", "PHP streams", "Debian package php-cli", "php",
           _argv("{bin}", "-r", "file_get_contents($argv[1]);", "{url}"),
           ("{bin}", "-r", "echo PHP_VERSION, ' ', OPENSSL_VERSION_TEXT, PHP_EOL;"),
           r"^([\d.]+)\S* OpenSSL (?P<lib>[\d.]+)", "OpenSSL {lib}",
           "php-{v2}-openssl-{lib2}-{plat}", _S, "file_get_contents (PHP's https stream "
           "wrapper, its own cipher list)"),
    Recipe("erlang", "Erlang/OTP httpc", "Debian packages erlang-base, erlang-ssl and "
           "erlang-inets", "erl",
           lambda run: [run.binary, "-noshell", "-eval", ERLANG.replace("URL", run.url)],
           ("{bin}", "-noshell", "-eval", ("application:load(ssl), {ok, V} = "
                                           "application:get_key(ssl, vsn), io:format(\"~s ~s~n\", "
                                           "[erlang:system_info(otp_release), V]), halt().")),
           r"^(\d+) (?P<lib>[\d.]+)", "Erlang/OTP ssl {lib}", "erlang-otp-{v1}-{plat}", _S,
           "httpc:request with the defaults"),
    Recipe("botan", "Botan tls_client", "Debian package botan", "botan",
           _argv("{bin}", "tls_client", "localhost", "--port={port}"),
           ("{bin}", "version", "--full"), r"Botan " + _V, "linked", "botan-{v2}-{plat}", _S),
    Recipe("tlslite", "tlslite-ng", "pip package tlslite-ng", _PY,
           _script("tlslite_get.py", TLSLITE),
           ("{bin}", "-c", "import tlslite; print(tlslite.__version__)"), r"^" + _V,
           "tlslite-ng (pure Python)", "tlslite-ng-{v2}-{plat}", _S,
           "TLSConnection.handshakeClientCert with the default HandshakeSettings"),
)
