"""Share groups (KIP-932): the share-partition state machine, share sessions, the share group membership
and the durable share-partition state in `__share_group_state`."""
