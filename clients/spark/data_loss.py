"""What happens when offsets a query asked for are gone: Spark's `failOnDataLoss`.

Offsets disappear when retention (or DeleteRecords) moves a partition's log start past them, or when a
topic is deleted and created again. Gaps *inside* a partition are not loss: compacted topics have them, and
transaction markers take offsets that no reader sees. With `failOnDataLoss=true` (the default) the query
fails with `DataLossError`; with `false` it logs a warning and skips ahead, as Spark's Kafka source does.
"""

from __future__ import annotations

import logging

LOG = logging.getLogger("pybroker.spark")

HINT = ("Some data may have been lost because it is no longer in the topic: retention or DeleteRecords "
        "removed it, or the topic was deleted and created again. If you do not want the query to fail in "
        "such cases, set the source option 'failOnDataLoss' to 'false'.")


class DataLossError(RuntimeError):
    """Offsets the query must read are no longer in the topic, and `failOnDataLoss` is true."""


def report_data_loss(message: str, *, fail: bool) -> None:
    """Raise (failOnDataLoss=true) or log a warning and let the caller skip ahead (false)."""
    if fail:
        raise DataLossError(f"{message}. {HINT}")
    LOG.warning("%s. Skipping ahead, as failOnDataLoss is false; some data may have been lost.", message)
