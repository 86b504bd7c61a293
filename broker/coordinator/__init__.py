"""The runtime every coordinator backed by an internal compacted topic shares (groups, transactions, next share groups)."""
