"""The log cleaner: compaction of `cleanup.policy=compact` logs, one job per module.

- `offset_map`: xxhash64(key) -> latest offset in fixed memory (`log.cleaner.dedupe.buffer.size`);
- `batch_filter`: which records of a batch survive (latest per key, tombstones until their horizon);
- `cleaned_segment`: writing a replacement segment under `.cleaned` names;
- `grouping`: which segments are recopied together, so segment counts do not grow;
- `swap`: the crash-safe `.cleaned` -> `.swap` -> live renames and their completion at startup;
- `cleaner`: one clean of one log (map the dirty section, recopy, swap);
- `selection`: clean/dirty/uncleanable sections of a log and its dirty ratio;
- `checkpoint`: `cleaner-offset-checkpoint`, the first dirty offset of each log;
- `throttle`: `log.cleaner.io.max.bytes.per.second`;
- `metrics`: the cleaner's Prometheus families;
- `job`, `log_view`, `channel`, `worker`, `process_cleaner`: the clean in a worker process (the default),
  off the broker's interpreter lock, its offset map in the worker's memory; the broker only swaps;
- `manager`: picks the filthiest log, runs cleaner threads, never lets one fail silently.

Nothing is imported here: the loader imports `swap` while `manager` imports the log.
"""
