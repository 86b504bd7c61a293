"""The admin command line: `pybroker topics|groups|produce|consume|configs|log-dirs|health|...` and the offline
`dump-log` and `check-log` (docs/cli.md describes every command).

- `wire`: a small blocking Kafka client over our own codecs (no client library at run time).
- `cli_support`: what every command shares: the wire options, failures as one line or JSON, progress bars.
- `topics`, `groups`, `cluster`, `acls`, `users`, `quotas`: what the wire commands ask the broker, as rows.
- `producer`, `consumer`, `formats`: produce and consume (partitioner, fetch loop, group membership, and
  records as lines of text or JSON).
- `assignment`: the consumer protocol's member assignment bytes, decoded for `groups describe`.
- `dump_log`: a segment or index file as kafka-dump-log prints it (with the offsets and transaction-log
  decoders).
- `times`: dates with time zones and durations on the command line.
- `output`: rows as a table for people or JSON for scripts.
- `commands`, `group_commands`, `data_commands`, `cluster_commands`, `offline_commands`: the click commands.
"""
