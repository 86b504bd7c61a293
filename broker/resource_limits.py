"""Open-file limits: raise the soft limit at start, and turn it into a cap on partitions.

Each partition keeps its active segment's `.log` open while it is in use, and every connection is a
socket, so descriptors are what a broker runs out of first. The common default soft limit (1,024) is far
below the hard limit most systems allow, so the broker raises its soft limit to the hard one at start, as
a service manager would. What it then has is split: a quarter (at least `MIN_RESERVED_FDS`) is left for
connections, segment reads, checkpoints and the runtime, and the rest bounds the partitions the broker
may hold, so a creation is refused with a clear error before the process meets EMFILE.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from pybroker.config.broker_config import BrokerConfig
from pybroker.storage.log_manager import LogManager

#: descriptors never handed to partitions: connections, segment reads, checkpoints, the runtime
MIN_RESERVED_FDS = 256
RESERVED_SHARE = 4  # a quarter of the limit, when that is more


@dataclass(frozen=True, slots=True)
class OpenFileLimits:
    soft_before: int
    soft: int
    hard: int
    error: str | None = None


def raise_open_file_limit() -> OpenFileLimits:
    """Raise the soft RLIMIT_NOFILE to the hard limit (an unlimited hard limit is capped at the kernel's
    `nr_open`, which `setrlimit` refuses to pass)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else _nr_open()
    if soft != resource.RLIM_INFINITY and soft >= target:
        return OpenFileLimits(soft, soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError) as exc:
        return OpenFileLimits(soft, soft, hard, repr(exc))
    return OpenFileLimits(soft, target, hard)


def _nr_open() -> int:
    try:
        with open("/proc/sys/fs/nr_open") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 1_048_576


def partition_budget(soft_limit: int) -> int:
    """Partitions the descriptor limit allows, leaving the reserve for everything else."""
    if soft_limit == resource.RLIM_INFINITY:
        return 2**31 - 1
    reserved = max(MIN_RESERVED_FDS, soft_limit // RESERVED_SHARE)
    return max(soft_limit - reserved, 0)


def apply_partition_limits(logs: LogManager, config: BrokerConfig, soft_limit: int) -> None:
    """The log manager's cap: `max.broker.partitions` or the descriptor budget, whichever is smaller."""
    configured = int(config.get("max.broker.partitions"))
    budget = partition_budget(soft_limit)
    if budget < configured:
        logs.max_partitions = budget
        logs.max_partitions_source = (f"the open-file budget: {soft_limit} descriptors (ulimit -n), "
                                      f"{soft_limit - budget} of them kept for connections and reads")
    else:
        logs.max_partitions = configured
        logs.max_partitions_source = "max.broker.partitions"
