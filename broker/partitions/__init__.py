"""The partition layer: Kafka's ReplicaManager and Partition, and the one deferred-response primitive.

`manager.ReplicaManager` is what handlers and coordinators call (`state.replicas`); `partition.Partition`
appends (the append, the wake of waiting fetches and the durable wait of acks=all in one call), reads and
waits for positions; `delayed.DelayedOperation` is every answer that waits (acks=all, fetch long-polls,
offsets-topic commits, transaction markers and state writes); `purgatory.Purgatory` is where operations
watch partitions.
"""
