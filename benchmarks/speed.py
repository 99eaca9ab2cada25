"""`tlsprobe speed` beside a bare timing loop and `openssl speed`, in one run.

For every primitive (default: all of them) and every operation this prints three figures:

* tlsprobe   - `python -m tlsprobe speed --json --seconds S ALGORITHM...` (a subprocess, as a
               user runs it);
* bare loop  - the same `cryptography` call in a plain `for _ in range(n): call(...)` loop
               timed with perf_counter, written here independently of tlsprobe.speed;
* openssl    - `openssl speed -elapsed` on the primitives it knows (parsed with
               tlsprobe.speed.openssl, whose parser tests/speed/test_speed.py checks against
               openssl's own counts).

Per round and algorithm, tlsprobe and the bare loops run next to each other (each side
first in turn); --rounds rounds spread over the whole run and the best of each side is
kept: noise on a shared machine only ever slows a run down, and busy spells then hit
different figures in different rounds. openssl speed runs
--openssl-rounds times (best kept). It then says whether each tlsprobe figure is within
10% of its bare loop.

Usage: python3 benchmarks/speed.py [--seconds S] [--rounds R] [--openssl-rounds O]
                                   [--bytes N,N] [ALGORITHM...]
Takes about 2 * R * S per figure, R * 0.5 s per algorithm (process start, key generation)
and O times openssl's run (~1 s per figure it knows): ~8 min for everything with the
defaults (S = 0.25, R = 5, O = 2).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import (
    ec,
    ed448,
    ed25519,
    mldsa,
    mlkem,
    padding,
    rsa,
    x448,
    x25519,
)
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tlsprobe.kex.ffdhe_primes import FFDHE_GROUPS
from tlsprobe.speed import catalog, library_versions
from tlsprobe.speed import openssl as openssl_speed
from tlsprobe.speed.base import Algorithm
from tlsprobe.model.speed import AlgorithmResult, Figure

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from cryptography.hazmat.primitives.asymmetric import dh

# A bare loop: given n, run the call n times and return the seconds it took.
Loop = Callable[[int], float]
TLS13_CONTENT = (b" " * 64 + b"TLS 1.3, server CertificateVerify\x00"
                 + hashlib.sha256(b"bench").digest())


def _timed(call: Callable[[], object]) -> Loop:
    """Only for composite operations (hybrids), where a Python function is the operation."""
    def loop(n: int) -> float:
        start = perf_counter()
        for _ in range(n):
            call()
        return perf_counter() - start
    return loop


def _loop_keygen(generate: Callable[..., object], *args: object) -> Loop:
    if not args:
        def loop0(n: int) -> float:
            start = perf_counter()
            for _ in range(n):
                generate()
            return perf_counter() - start
        return loop0
    (arg,) = args

    def loop1(n: int) -> float:
        start = perf_counter()
        for _ in range(n):
            generate(arg)
        return perf_counter() - start
    return loop1


def bare_x(cls: Any) -> dict[str, Loop]:
    gen = cls.generate
    private, peer = gen(), gen().public_key()
    exchange = private.exchange

    def derive(n: int) -> float:
        start = perf_counter()
        for _ in range(n):
            exchange(peer)
        return perf_counter() - start
    return {"keygen": _loop_keygen(gen), "derive": derive}


def bare_ec(curve: ec.EllipticCurve) -> dict[str, Loop]:
    private = ec.generate_private_key(curve)
    peer = ec.generate_private_key(curve).public_key()
    exchange, algorithm = private.exchange, ec.ECDH()

    def derive(n: int) -> float:
        start = perf_counter()
        for _ in range(n):
            exchange(algorithm, peer)
        return perf_counter() - start
    return {"keygen": _loop_keygen(ec.generate_private_key, curve), "derive": derive}


def bare_ffdhe(bits: int) -> dict[str, Loop]:
    prime = next(p for _, p in FFDHE_GROUPS.values() if p.bit_length() == bits)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parameters = dh.DHParameterNumbers(prime, 2).parameters()
    private = parameters.generate_private_key()
    peer = parameters.generate_private_key().public_key()
    exchange = private.exchange

    def derive(n: int) -> float:
        start = perf_counter()
        for _ in range(n):
            exchange(peer)
        return perf_counter() - start
    return {"keygen": _loop_keygen(parameters.generate_private_key), "derive": derive}


def bare_mlkem(cls: Any) -> dict[str, Loop]:
    private = cls.generate()
    encapsulate = private.public_key().encapsulate
    _, ciphertext = encapsulate()
    decapsulate = private.decapsulate

    def encaps(n: int) -> float:
        start = perf_counter()
        for _ in range(n):
            encapsulate()
        return perf_counter() - start

    def decaps(n: int) -> float:
        start = perf_counter()
        for _ in range(n):
            decapsulate(ciphertext)
        return perf_counter() - start
    return {"keygen": _loop_keygen(cls.generate), "encaps": encaps, "decaps": decaps}


def bare_hybrid(kem: Any, kem_public: Any, curve: ec.EllipticCurve | None) -> dict[str, Loop]:
    """The TLS hybrid flow, written out: shares as bytes, secrets concatenated."""
    ek_len = len(kem.generate().public_key().public_bytes_raw())
    ct_len = 1088 if ek_len == 1184 else 1568

    def ec_pair() -> tuple[object, bytes]:
        if curve is None:
            key = x25519.X25519PrivateKey.generate()
            return key, key.public_key().public_bytes_raw()
        eckey = ec.generate_private_key(curve)
        return eckey, eckey.public_key().public_bytes(Encoding.X962,
                                                      PublicFormat.UncompressedPoint)

    def ec_secret(key: object, peer: bytes) -> bytes:
        if curve is None:
            return key.exchange(x25519.X25519PublicKey.from_public_bytes(peer))  # type: ignore[attr-defined]
        return key.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(curve, peer))  # type: ignore[attr-defined]

    def client_hello() -> tuple[object, object, bytes]:
        kem_key = kem.generate()
        ec_key, ec_pub = ec_pair()
        ek = kem_key.public_key().public_bytes_raw()
        return kem_key, ec_key, (ek + ec_pub if curve is None else ec_pub + ek)

    def server(share: bytes) -> tuple[bytes, bytes]:
        ek, peer = (share[:ek_len], share[ek_len:]) if curve is None else \
            (share[-ek_len:], share[:-ek_len])
        kem_ss, ct = kem_public.from_public_bytes(ek).encapsulate()
        ec_key, ec_pub = ec_pair()
        ec_ss = ec_secret(ec_key, peer)
        if curve is None:
            return ct + ec_pub, kem_ss + ec_ss
        return ec_pub + ct, ec_ss + kem_ss

    def client_finish(kem_key: object, ec_key: object, share: bytes) -> bytes:
        ct, peer = (share[:ct_len], share[ct_len:]) if curve is None else \
            (share[-ct_len:], share[:-ct_len])
        kem_ss = kem_key.decapsulate(ct)  # type: ignore[attr-defined]
        ec_ss = ec_secret(ec_key, peer)
        return kem_ss + ec_ss if curve is None else ec_ss + kem_ss

    kem_key, ec_key, client_share = client_hello()
    server_share, secret = server(client_share)
    if client_finish(kem_key, ec_key, server_share) != secret:
        raise SystemExit("bare hybrid exchange disagrees with itself")
    return {"keygen": _timed(client_hello), "encaps": _timed(lambda: server(client_share)),
            "decaps": _timed(lambda: client_finish(kem_key, ec_key, server_share))}


def _sign_verify(sign: Callable[..., bytes], verify: Callable[..., None],
                 args: tuple[object, ...]) -> dict[str, Loop]:
    signature = sign(*args)
    if len(args) == 1:
        (data,) = args

        def sign1(n: int) -> float:
            start = perf_counter()
            for _ in range(n):
                sign(data)
            return perf_counter() - start

        def verify1(n: int) -> float:
            start = perf_counter()
            for _ in range(n):
                verify(signature, data)
            return perf_counter() - start
        return {"sign": sign1, "verify": verify1}
    data, *rest = args
    if len(rest) == 1:
        (alg,) = rest

        def sign2(n: int) -> float:
            start = perf_counter()
            for _ in range(n):
                sign(data, alg)
            return perf_counter() - start

        def verify2(n: int) -> float:
            start = perf_counter()
            for _ in range(n):
                verify(signature, data, alg)
            return perf_counter() - start
        return {"sign": sign2, "verify": verify2}
    pad, prehashed = rest

    def sign3(n: int) -> float:
        start = perf_counter()
        for _ in range(n):
            sign(data, pad, prehashed)
        return perf_counter() - start

    def verify3(n: int) -> float:
        start = perf_counter()
        for _ in range(n):
            verify(signature, data, pad, prehashed)
        return perf_counter() - start
    return {"sign": sign3, "verify": verify3}


_RSA: dict[int, rsa.RSAPrivateKey] = {}


def bare_rsa(bits: int, pss: bool) -> dict[str, Loop]:
    if bits not in _RSA:  # one key per size for PKCS#1 v1.5 and PSS, as tlsprobe does
        _RSA[bits] = rsa.generate_private_key(65537, bits)
    key = _RSA[bits]
    pad = (padding.PSS(padding.MGF1(hashes.SHA256()), padding.PSS.DIGEST_LENGTH) if pss
           else padding.PKCS1v15())
    digest = hashlib.sha256(TLS13_CONTENT).digest()
    return _sign_verify(key.sign, key.public_key().verify,
                        (digest, pad, Prehashed(hashes.SHA256())))


def bare_ecdsa(curve: ec.EllipticCurve, hash_cls: Any) -> dict[str, Loop]:
    key = ec.generate_private_key(curve)
    digest = hashlib.new(hash_cls.name, TLS13_CONTENT).digest()
    return _sign_verify(key.sign, key.public_key().verify,
                        (digest, ec.ECDSA(Prehashed(hash_cls()))))


def bare_pure(generate: Callable[[], object]) -> dict[str, Loop]:
    key = generate()
    return _sign_verify(key.sign, key.public_key().verify, (TLS13_CONTENT,))  # type: ignore[attr-defined]


def bare_aead(aead: object, sizes: list[int]) -> dict[str, Loop]:
    encrypt = aead.encrypt  # type: ignore[attr-defined]
    nonce, aad = bytes(12), bytes(13)
    loops: dict[str, Loop] = {}
    for size in sizes:
        def seal(n: int, block: bytes = bytes(size)) -> float:
            start = perf_counter()
            for _ in range(n):
                encrypt(nonce, block, aad)
            return perf_counter() - start
        loops[f"encrypt/{size}"] = seal
    return loops


def bare_loops(name: str, sizes: list[int]) -> dict[str, Loop]:
    """The bare loops of one algorithm, by operation ("encrypt/16" for AEAD blocks)."""
    curves = {"p256": ec.SECP256R1(), "p384": ec.SECP384R1(), "p521": ec.SECP521R1(),
              "secp256k1": ec.SECP256K1(), "brainpoolp256r1": ec.BrainpoolP256R1(),
              "brainpoolp384r1": ec.BrainpoolP384R1(), "brainpoolp512r1": ec.BrainpoolP512R1()}
    if name in ("x25519", "x448"):
        return bare_x(x25519.X25519PrivateKey if name == "x25519" else x448.X448PrivateKey)
    if name in curves:
        return bare_ec(curves[name])
    if name.startswith("ffdhe"):
        return bare_ffdhe(int(name[5:]))
    kems = {768: (mlkem.MLKEM768PrivateKey, mlkem.MLKEM768PublicKey),
            1024: (mlkem.MLKEM1024PrivateKey, mlkem.MLKEM1024PublicKey)}
    if name.startswith("mlkem"):
        return bare_mlkem(kems[int(name[5:])][0])
    hybrids = {"x25519mlkem768": (768, None), "secp256r1mlkem768": (768, ec.SECP256R1()),
               "secp384r1mlkem1024": (1024, ec.SECP384R1())}
    if name in hybrids:
        level, curve = hybrids[name]
        return bare_hybrid(*kems[level], curve)
    if name.startswith("rsa"):
        return bare_rsa(int(name[3:7]), name.endswith("-pss"))
    ecdsa = {"ecdsap256": (ec.SECP256R1(), hashes.SHA256), "ecdsap384": (ec.SECP384R1(),
             hashes.SHA384), "ecdsap521": (ec.SECP521R1(), hashes.SHA512)}
    if name in ecdsa:
        return bare_ecdsa(*ecdsa[name])
    pure = {"ed25519": ed25519.Ed25519PrivateKey.generate,
            "ed448": ed448.Ed448PrivateKey.generate,
            "mldsa44": mldsa.MLDSA44PrivateKey.generate,
            "mldsa65": mldsa.MLDSA65PrivateKey.generate,
            "mldsa87": mldsa.MLDSA87PrivateKey.generate}
    if name in pure:
        return bare_pure(pure[name])
    aeads = {"aes-128-gcm": lambda: AESGCM(bytes(16)), "aes-256-gcm": lambda: AESGCM(bytes(32)),
             "chacha20-poly1305": lambda: ChaCha20Poly1305(bytes(32)),
             "aes-128-ccm": lambda: AESCCM(bytes(16), tag_length=16)}
    return bare_aead(aeads[name](), sizes)


Key = tuple[str, str]  # (algorithm, operation), operation "encrypt/16" for AEAD blocks


def run_tlsprobe(names: list[str], seconds: float, sizes: list[int]) -> dict[Key, float]:
    """One `tlsprobe speed --json` run over all `names`: its figures by (algorithm, op)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "tlsprobe", "speed", "--json", "--seconds",
                           str(seconds), "--bytes", ",".join(map(str, sizes)), *names],
                          capture_output=True, text=True, env=env, check=True, timeout=3600)
    return {(r["algorithm"], f"{f['operation']}/{f['block_size']}" if f["block_size"]
             else f["operation"]): f["per_second"]
            for r in json.loads(done.stdout)["results"] for f in r["figures"]}


def run_bare(loops: dict[str, dict[str, Loop]], seconds: float,
             hint: dict[Key, float]) -> dict[Key, float]:
    """Every bare loop once, sized from `hint` (op/s) to last about `seconds`."""
    rates = {}
    for name, by_op in loops.items():
        for op, loop in by_op.items():
            loop(1)  # warm-up, as tlsprobe does
            n = max(1, int(hint.get((name, op), 1000.0) * seconds))
            rates[(name, op)] = n / loop(n)
    return rates


def run_openssl(algorithms: list[Algorithm], best_tl: dict[Key, float], seconds: float,
                rounds: int) -> tuple[dict[Key, float], str]:
    """Best `openssl speed` op/s per (algorithm, op) over `rounds` runs, and its version."""
    results = [AlgorithmResult(a.name, a.kind, a.description, tuple(
        Figure(op.split("/")[0], 1, 1.0, rate, int(op.split("/")[1]) if "/" in op else None)
        for (name, op), rate in best_tl.items() if name == a.name)) for a in algorithms]
    best: dict[Key, float] = {}
    version = ""
    for _ in range(rounds):
        comparison = openssl_speed.compare(algorithms, results, seconds=max(1.0, seconds))
        version = comparison.version or comparison.error or ""
        for r in comparison.rows:
            if r.openssl:
                key = (r.algorithm, f"{r.operation}/{r.block_size}" if r.block_size
                       else r.operation)
                rate = r.openssl / r.block_size if r.block_size else r.openssl
                best[key] = max(best.get(key, 0.0), rate)
    return best, version


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("algorithms", nargs="*")
    parser.add_argument("--seconds", type=float, default=0.25)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--openssl-rounds", type=int, default=2)
    parser.add_argument("--bytes", default="16,64,256,1024,8192,16384")
    args = parser.parse_args()
    sizes = [int(s) for s in args.bytes.split(",")]
    algorithms = catalog.resolve(args.algorithms)
    names = [a.name for a in algorithms]
    loops = {name: bare_loops(name, sizes) for name in names}
    best_tl: dict[Key, float] = {}
    best_bare: dict[Key, float] = {}
    load_before = os.getloadavg()[0]
    for round_no in range(args.rounds):
        # Each algorithm's tlsprobe run sits right next to its bare loops (same machine
        # state), the side that goes first alternates, and rounds are spread over the whole
        # run, so a busy spell on a shared machine hits different figures in different
        # rounds; the best of each side survives.
        for index, name in enumerate(names):
            hint = {k: v for k, v in best_tl.items() if k[0] == name}
            if (round_no + index) % 2 == 0 or not hint:
                ours = run_tlsprobe([name], args.seconds, sizes)
                bare = run_bare({name: loops[name]}, args.seconds, hint or ours)
            else:
                bare = run_bare({name: loops[name]}, args.seconds, hint)
                ours = run_tlsprobe([name], args.seconds, sizes)
            for key in ours:
                best_tl[key] = max(best_tl.get(key, 0.0), ours[key])
                best_bare[key] = max(best_bare.get(key, 0.0), bare[key])
        print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print("running openssl speed ...", file=sys.stderr, flush=True)
    theirs, version = run_openssl(algorithms, best_tl, args.seconds, args.openssl_rounds)

    crypto, linked = library_versions()
    print(f"tlsprobe speed vs bare loop vs openssl speed; cryptography {crypto} ({linked});")
    print(f"openssl: {version} (best of {args.openssl_rounds}); {os.cpu_count()} CPUs, "
          f"load average {load_before:.2f} -> {os.getloadavg()[0]:.2f}; "
          f"best of {args.rounds} x {args.seconds} s")
    print(f"{'algorithm':<20}{'operation':<15}{'tlsprobe/s':>13}{'bare loop/s':>13}"
          f"{'tl/bare':>9}  {'<=10%':<6}{'openssl/s':>13}{'tl/openssl':>11}")
    within = 0
    for (name, op), tl_rate in best_tl.items():
        bare_rate = best_bare[(name, op)]
        ratio = tl_rate / bare_rate
        ok = abs(ratio - 1) <= 0.10
        within += ok
        other = theirs.get((name, op))
        print(f"{name:<20}{op:<15}{tl_rate:>13.1f}{bare_rate:>13.1f}{ratio:>9.3f}  "
              f"{'yes' if ok else 'NO':<6}{(f'{other:.1f}' if other else '-'):>13}"
              f"{(f'{tl_rate / other:.2f}' if other else '-'):>11}")
    print(f"{within} of {len(best_tl)} tlsprobe figures within 10% of the bare loop", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
