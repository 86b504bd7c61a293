"""pybroker.protocol.messages."""
