"""pybroker.protocol.schema."""
