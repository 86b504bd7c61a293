"""The classic group coordinator: group state, its transitions, and `__consumer_offsets` persistence."""
