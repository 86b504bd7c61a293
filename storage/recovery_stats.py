"""What loading one log dir took (startup logs it, tests check it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RecoveryStats:
    """What loading one log dir took."""

    log_dir: str
    clean_shutdown: bool
    #: the dir had no meta.properties before this start: nothing to recover, no shutdown to speak of
    new_dir: bool = False
    partitions: int = 0
    segments_recovered: int = 0
    bytes_truncated: int = 0
    malformed_batches: int = 0
    stray_partitions: int = 0
    seconds: float = 0.0
