"""The broker's own logging (log lines, not Kafka's log): structlog's set-up, runtime logger levels (Kafka's
broker-logger config resource) and the rate limit on warnings a client can cause.

Named apart from `storage/log*.py`, which is Kafka's log of records.
"""
