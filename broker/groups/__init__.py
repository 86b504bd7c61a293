"""The group coordinator: classic and consumer-protocol groups, their offsets, and `__consumer_offsets` persistence."""
