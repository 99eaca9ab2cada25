"""Small TLS server programs and key material used by the test suite (loopback only).

The ``*_server.py`` files are run as scripts by ``tests/helpers/servers.py``; ``certs`` builds the
test CA, server certificates and DH parameter files with the ``cryptography`` API.
"""
