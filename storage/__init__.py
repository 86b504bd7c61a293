"""pybroker.storage."""
