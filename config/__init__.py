"""pybroker.config."""
