"""How each input of a request was spelt by its caller: the command line's options
(`--key-shares`) or the API's parameters (`key_shares`). Checks write their one-line
messages with these names, so that one check serves both."""

from __future__ import annotations

from dataclasses import dataclass

#: the command line's spellings that are not "--" + the field with '-' for '_'
_OPTIONS = {"sni": "--sni", "no_sni": "--no-sni", "versions": "--tls1_3/--tls1_2",
            "bpf": "-f/--filter", "interface": "-i/--interface", "count": "-c/--count",
            "buffer_mb": "-B/--buffer-size", "policies": "--policy"}
#: the API's spellings that are not the field itself
_PARAMETERS = {"sni": "server_name", "no_sni": "send_sni=False", "no_verify": "verify=False",
               "timing_runs": "runs", "timing_warmup": "warmup", "timing_timeout": "timeout",
               "timing_versions": "versions", "timing_groups": "groups",
               "timing_suites": "suites", "timing_confidence": "confidence"}
#: an example value per list: (as an option's text, as a parameter's value)
_EXAMPLES = {"groups": ("x25519:P-256", "['x25519', 'P-256']"),
             "key_shares": ("x25519 (or none)", "['x25519'] (or [] for none)"),
             "sigalgs": ("rsa_pss_rsae_sha256", "['rsa_pss_rsae_sha256']"),
             "ciphers": ("ECDHE-RSA-AES128-GCM-SHA256", "['ECDHE-RSA-AES128-GCM-SHA256']"),
             "ciphersuites": ("TLS_AES_128_GCM_SHA256", "['TLS_AES_128_GCM_SHA256']"),
             "versions": ("1.3", "['1.3']"),
             "timing_groups": ("x25519:ffdhe2048", "['x25519', 'ffdhe2048']"),
             "timing_suites": ("TLS_AES_128_GCM_SHA256 (or all)",
                               "['TLS_AES_128_GCM_SHA256'] (or 'all')")}


@dataclass(frozen=True)
class Names:
    """The spelling of a request's inputs: `options` True for the command line."""

    options: bool

    def __call__(self, field: str) -> str:
        """The name of input `field` ("key_shares") as its caller wrote it."""
        if self.options:
            return _OPTIONS.get(field, "--" + field.replace("_", "-"))
        return _PARAMETERS.get(field, field)

    def example(self, field: str) -> str:
        """An example of a good value of list `field`: `--groups x25519:P-256` or
        `groups=['x25519', 'P-256']`."""
        text, value = _EXAMPLES[field]
        return f"{self(field)} {text}" if self.options else f"{self(field)}={value}"


#: the command line's spellings, and the Python API's
CLI = Names(options=True)
API = Names(options=False)

#: the engine's limits as options (--max-message ...), the probe's and scan's
LIMIT_OPTIONS = ("max_message", "max_chain", "max_records", "max_bytes")

__all__ = ["API", "CLI", "LIMIT_OPTIONS", "Names"]
