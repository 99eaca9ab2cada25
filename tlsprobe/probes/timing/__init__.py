"""Handshake timing: N full handshakes per group or suite, ranked by cost (`run.py`;
what is timed: `plan.py`)."""
