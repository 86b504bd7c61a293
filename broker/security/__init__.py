"""Authentication: SASL mechanisms as sans-I/O state machines, their credentials, and the per-connection session."""
