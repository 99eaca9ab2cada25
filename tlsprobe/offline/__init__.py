"""Offline analysis of captures: TCP streams and QUIC Initials -> one report per TLS connection."""
