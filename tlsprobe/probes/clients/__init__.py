"""Client simulation: real clients' ClientHellos (profiles) sent to a server, and what each
negotiates (model/clients.py)."""
