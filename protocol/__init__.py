"""pybroker.protocol."""
