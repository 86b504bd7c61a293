"""pybroker.protocol.records."""
