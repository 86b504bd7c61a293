"""The cleaner's Prometheus families (the /metrics page serves the default registry).

A cleaner that stops working must show here: uncleanable partitions and dead threads are the two
numbers an operator alerts on (the silent death in Heroku's story is exactly what they catch).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

CLEANER_RUNS = Counter("pybroker_cleaner_runs", "Cleans of a log, by outcome (cleaned, aborted, failed).",
                       ["result"])
UNCLEANABLE_PARTITIONS = Gauge("pybroker_cleaner_uncleanable_partitions",
                               "Partitions whose last clean failed; skipped until the broker restarts.",
                               ["log_dir"])
DEAD_THREADS = Gauge("pybroker_cleaner_dead_threads",
                     "Cleaner threads found dead (and restarted) since the broker started.")
BYTES_RECLAIMED = Counter("pybroker_cleaner_bytes_reclaimed", "Bytes of log removed by compaction.")
MALFORMED_BATCHES = Counter("pybroker_cleaner_malformed_batches",
                            "Batches whose records could not be decoded, kept whole (their keys not deduplicated).")
WORKER_DEATHS = Counter("pybroker_cleaner_worker_deaths",
                        "Cleaner worker processes that died in the middle of a clean (the clean is retried).")
