"""Streams groups (KIP-1071): the group, its topology, the task assignor and its records."""
