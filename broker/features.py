"""The cluster features pybroker advertises in ApiVersions v3+ (KIP-584): a table, and the rows Kafka writes.

Each feature has a supported range (what this software can run) and a finalized level (what the cluster
runs; 0 means "not enabled" and is never listed). pybroker is a single node with nothing to upgrade, so
the finalized levels are constants, and the epoch Kafka takes from its metadata log is one constant too:
clients only compare it with -1 ("no features known") and with the last epoch they saw.

What clients read: the Java producer (Kafka 3.9+) turns transactions v2 (KIP-890: Produce v12 adds the
partition to the transaction, EndTxn v5 bumps the epoch on every commit/abort, TxnOffsetCommit v5 does
AddOffsetsToTxn's work) on when `transaction.version` is finalized at 2 or more and the epoch is not -1.
Admin clients (Java's and kafka-python's `describe_features`, kafka-features.sh) list the whole table;
`metadata.version` is there as a Kafka 4.0 broker shows it (supported 3.3-IV3..4.0-IV3, levels 7-25).
librdkafka and aiokafka read no features.

A level is only finalized when the registered handlers serve the versions it needs (`NEEDS`): clients on
transactions v2 send Produce v12 and EndTxn v5 and nothing older, so advertising it before those are
served would break them. Kafka's rules for the rows: a v3 request gets no supported feature whose
minimum is 0 (KAFKA-17011: older clients refuse to read a zero minimum; v4 fixed that), and each finalized
feature is listed with min = max = its level.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.api_versions import FinalizedFeatureKey, SupportedFeatureKey

#: what Kafka's FinalizedFeaturesEpoch would be (its metadata log offset); any value above -1 will do
FINALIZED_FEATURES_EPOCH = 1

#: the first ApiVersions version whose clients read a supported feature with minimum 0
ZERO_MINIMUM_API_VERSION = 4


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_version: int
    max_version: int
    finalized: int
    #: (level, api, version): that level and those above are finalized only when `api` is served at `version`
    needs: tuple[tuple[int, ApiKey, int], ...] = ()


FEATURES: tuple[Feature, ...] = (
    Feature("metadata.version", 7, 25, 25),
    Feature("transaction.version", 0, 2, 2, needs=(
        (2, ApiKey.PRODUCE, 12),
        (2, ApiKey.END_TXN, 5),
        (2, ApiKey.TXN_OFFSET_COMMIT, 5),
    )),
)


def supported_feature_keys(api_version: int, features: tuple[Feature, ...] = FEATURES) -> list[SupportedFeatureKey]:
    """The SupportedFeatures rows for a request of `api_version` (none with minimum 0 below v4)."""
    return [SupportedFeatureKey(name=f.name, min_version=f.min_version, max_version=f.max_version)
            for f in features
            if f.max_version > 0 and (f.min_version > 0 or api_version >= ZERO_MINIMUM_API_VERSION)]


def finalized_level(feature: Feature, served: Mapping[int, int]) -> int:
    """The feature's finalized level, lowered to the highest one whose needed API versions are served.

    `served` maps each registered API key to the highest version its handler serves.
    """
    for level in range(feature.finalized, 0, -1):
        if all(served.get(api, -1) >= version for needed, api, version in feature.needs if needed <= level):
            return level
    return 0


def finalized_feature_keys(served: Mapping[int, int],
                           features: tuple[Feature, ...] = FEATURES) -> list[FinalizedFeatureKey]:
    """The FinalizedFeatures rows: every feature finalized above level 0, with min = max = its level."""
    rows = []
    for f in features:
        level = finalized_level(f, served)
        if level > 0:
            rows.append(FinalizedFeatureKey(name=f.name, max_version_level=level, min_version_level=level))
    return rows
