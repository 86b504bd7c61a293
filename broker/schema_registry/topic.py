"""The `_schemas` topic: one partition, compacted, created on the first change; every change is one batch
appended through the partition layer as an acks=all produce is (`InternalTopic.write_batch`), answered only
once fsynced, and the whole partition is read back at start.

Records written by another registry after the broker started are not followed (read at the next start).
Threads: `write` on the event loop; `replay` blocks (a worker thread, before the registry serves).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pybroker.broker.coordinator.internal_topic import NOT_WRITTEN, InternalTopic, batches_of
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.schema_registry.errors import RegistryError
from pybroker.broker.schema_registry.records import Key, decode, encode_value
from pybroker.broker.schema_registry.store import RegistryState
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import RecordsError
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.errors import StorageError

if TYPE_CHECKING:
    from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions

log = get_logger("pybroker.schema_registry")


class SchemasTopic(InternalTopic):
    def __init__(self, partitions: CoordinatorPartitions, name: str) -> None:
        # one partition (Confluent's registry requires it: the order of changes is the log's order)
        self.partitions = partitions
        self.name = name
        self.num_partitions = 1
        self._configs = {"cleanup.policy": "compact", "compression.type": "producer"}

    async def write(self, records: list[tuple[Key, dict[str, Any] | None]]) -> None:
        """Append the records as one batch; returns once fsynced, raises RegistryError(50001) on failure."""
        try:
            if not self.exists():
                await self.ensure_off_loop()
        except (OSError, StorageError) as exc:
            log.error("cannot create the schemas topic", topic=self.name, error=str(exc))
            raise RegistryError(50001, "Error while creating the schemas topic") from None
        loop = asyncio.get_running_loop()
        written: asyncio.Future[ErrorCode] = loop.create_future()

        def done(code: ErrorCode, _found: bool) -> None:
            if not written.done():
                written.set_result(code)

        now = self.partitions.clock_ms()
        batch = [Record(i, 0, key.encode(), encode_value(value)) for i, (key, value) in enumerate(records)]
        offset = self.write_batch(0, lambda _log: build_batch(batch, base_timestamp=now), now, done)
        code = await written
        if offset == NOT_WRITTEN or code is not ErrorCode.NONE:
            raise RegistryError(50001, f"Error while writing to the schemas topic: {code.name}")

    def replay(self, state: RegistryState) -> None:
        """Apply every record of the partition (blocking: a worker thread)."""
        partition_log = self.partitions.log_for_replay(self.name, 0)
        if partition_log is None:
            return
        for data, pos, header, read_from in batches_of(partition_log):
            if header.is_control:
                continue
            try:
                records = decode_records(data, pos, header)
            except RecordsError:
                log.warning("unreadable batch in the schemas topic skipped", offset=header.base_offset)
                continue
            for record in records:
                if header.base_offset + record.offset_delta < read_from:
                    continue
                decoded = decode(record.key, record.value)
                if decoded is not None:
                    state.apply(*decoded)
