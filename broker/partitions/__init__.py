"""The partition layer: Kafka's ReplicaManager and Partition, and the one deferred-response primitive.

`manager.ReplicaManager` is what handlers and coordinators call (`state.replicas`): every partition
lookup, and clients' produced records (`append_records`, carried out by `leader_append`, which checks and
stamps each batch through `validator` and keeps each partition's appends in arrival order through
`append_order`); `partition.Partition` appends (the append, the wake of waiting fetches and the durable
wait of acks=all in one call), reads and waits for positions; `delayed.DelayedOperation` is every
answer that waits (acks=all, fetch long-polls, offsets-topic commits, transaction markers and state
writes); `purgatory.Purgatory` is where operations watch partitions.
"""
