"""Kafka's transaction coordinator: state machine, metadata, the `__transaction_state` log and markers."""
