"""The admin command line: `pybroker topics|groups|dump-log|check-log`.

- `wire`: a small blocking Kafka client over our own codecs (no client library at run time).
- `topics`, `groups`: what the wire commands ask the broker, as plain rows.
- `assignment`: the consumer protocol's member assignment bytes, decoded for `groups describe`.
- `dump_log`: a segment or index file as kafka-dump-log prints it.
- `output`: rows as a table for people or JSON for scripts.
- `commands`: the click commands that tie them together.
"""
