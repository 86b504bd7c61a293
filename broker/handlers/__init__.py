"""pybroker.broker.handlers."""
