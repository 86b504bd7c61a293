"""pybroker.broker."""
