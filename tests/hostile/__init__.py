"""Hostile-server robustness tests: a scripted asyncio TLS server that misbehaves on purpose."""
