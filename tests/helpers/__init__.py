"""What several test packages share (docs/INTERNALS.md, "tests/"):

- `servers`: the loopback TLS server fixtures' machinery (start, wait, stop by PID);
- `lab_env`: the lab environment's Python (pyOpenSSL, aioquic) for the lab servers;
- `faultproxy`: a loopback proxy that drops, resets or delays chosen records;
- `capbuild`: pcap/pcapng files built byte by byte (frames, TCP/UDP conversations);
- `own_captures`: real handshake bytes from the project's own captures/;
- `shared_data`: the one way to find ../shared (corpus, IANA copies, lab DH) and to fail
  clearly when it is absent;
- `early_mypy`: the `mypy --strict` run started beside the suite (tests/project/test_typing.py);
- `accepting`: a scripted loopback server's accept loop, step player and one-line check.
"""
