"""Everything the handlers share: config, storage, topics, the partition layer, ids and the clock.

One object, built at startup and passed to each request's context, so handlers have no globals and
tests can build a state over a tmp dir.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pybroker.broker import fetch_sessions
from pybroker.broker.connection_guard import ConnectionGuard
from pybroker.broker.detached_work import DetachedWork
from pybroker.broker.dynamic_configs import DynamicBrokerConfigs
from pybroker.broker.empty_reads import EmptyReads
from pybroker.broker.groups.service import GroupService
from pybroker.broker.iceberg_tables import IcebergTables
from pybroker.broker.kraft_takeover import adopt_kafka_settings
from pybroker.broker.live_metadata import LiveMetadata
from pybroker.broker.log_cleaner import build_cleaner, cleaner_settings, follow_dynamic_configs
from pybroker.broker.metrics.traffic import TopicTraffic
from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
from pybroker.broker.partitions.manager import ReplicaManager
from pybroker.broker.security.authorizer import Authorizer
from pybroker.broker.security.quota_store import FILE_NAME as QUOTA_FILE
from pybroker.broker.security.quotas import ClientQuotas
from pybroker.broker.security.sasl_config import all_listeners_sasl
from pybroker.broker.security.scram_store import FILE_NAME as SCRAM_FILE
from pybroker.broker.security.scram_store import ScramStore
from pybroker.broker.share.service import ShareService
from pybroker.broker.streams_groups.group_configs import FILE_NAME as STREAMS_GROUP_CONFIGS_FILE
from pybroker.broker.streams_groups.group_configs import StreamsGroupConfigs
from pybroker.broker.telemetry.clients import ClientMetrics
from pybroker.broker.telemetry.subscriptions import FILE_NAME as CLIENT_METRICS_FILE
from pybroker.broker.telemetry.subscriptions import Subscriptions
from pybroker.broker.topics import Topics, log_config_for
from pybroker.broker.transactions.service import TransactionService, TxnParts
from pybroker.config.broker_config import BrokerConfig
from pybroker.storage.cleaner.throttle import UNLIMITED
from pybroker.storage.clock import wall_clock_ms
from pybroker.storage.kraft_export import forget_export
from pybroker.storage.log_manager import LogManager
from pybroker.storage.page_cache import PageCache
from pybroker.storage.producer_id_block import ProducerIdBlock

if TYPE_CHECKING:
    from pybroker.broker.schema_registry.registry import Registry

#: Kafka's default of a long setting: no limit
LONG_MAX = 2**63 - 1


class BrokerState:
    def __init__(self, config: BrokerConfig, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.clock_ms = clock_ms
        self.node_id = config.node_id
        self.logs = LogManager(
            [Path(d) for d in config.log_dirs],
            node_id=self.node_id,
            log_config_for=lambda overrides: log_config_for(config, overrides),
            clock_ms=clock_ms,
            page_cache=PageCache(int(config.get("log.page.cache.max.bytes"))),
        )
        self.topics = Topics(config, self.logs)
        self.dynamic_configs = DynamicBrokerConfigs(config, self.logs)
        self.cleaner = build_cleaner(config, self.logs, clock_ms)
        #: the supervisor of the Iceberg worker (topics with iceberg.mode), started once the broker serves
        self.iceberg = IcebergTables(config, self.logs)
        self.logs.moves.hold_cleaning = self.cleaner.held_off  # no clean of a partition while a move swaps it
        self.fetch_sessions = fetch_sessions.from_config(config)  # KIP-227 incremental fetch sessions
        self.empty_reads = EmptyReads()  # reads that fitted nothing, for the next fetch of those partitions
        self.traffic = TopicTraffic()  # per-topic bytes and messages, for the metrics
        #: the partition layer handlers append, read and wait through (Kafka's ReplicaManager)
        self.replicas = ReplicaManager(self.logs, self.traffic)
        #: where delayed operations (fetch long-polls, ...) watch partitions: the replicas' purgatory
        self.purgatory = self.replicas.purgatory
        self.connections: set[Any] = set()
        #: topic and store changes on worker threads, which finish even when their request is cancelled
        self.detached = DetachedWork()
        self.guard = ConnectionGuard(config)  # request memory, connection limits and timeouts
        #: listener name -> the (host, port) its clients are told (advertised.listeners, else listeners)
        self.advertised = config.advertised_addresses()
        self._producer_ids: ProducerIdBlock | None = None
        #: what a coordinator may do with partitions (its internal topic, markers), and nothing else
        coordinator_partitions = CoordinatorPartitions(config, clock_ms, self.replicas, detached=self.detached)
        self.groups = GroupService(coordinator_partitions)
        #: the transaction coordinator (`__transaction_state`, markers, timeouts), on the same narrow interface
        self.transactions = TransactionService(TxnParts(coordinator_partitions, self.groups, self.next_producer_id))
        #: share groups (KIP-932): membership, share sessions, share-partitions, `__share_group_state`
        self.shares = ShareService(config, clock_ms, self.replicas, self.groups, detached=self.detached)
        #: the ACL authorizer, or None when `authorizer.class.name` is not set (nothing is checked)
        self.authorizer = Authorizer.from_config(config, self.guard.warnings)
        #: SASL settings of each SASL listener by name (checked now: a mistake stops the start), and the
        #: SCRAM credentials (read at startup, from the first log dir)
        self.sasl_listeners = all_listeners_sasl(config)
        #: the schema registry's operations when it runs (`schema.registry.port`), for the console's page
        self.schema_registry: Registry | None = None
        self.scram = ScramStore(None)
        #: client quotas (producer/consumer byte rates), read at startup from the first log dir
        self.quotas = ClientQuotas.from_config(config, None)
        #: client telemetry (KIP-714): subscriptions (read at startup, from the first log dir) and instances
        self.client_metrics = ClientMetrics(Subscriptions(None), int(config.get("telemetry.max.bytes")))
        #: the live KRaft metadata log, appended to whenever a store of metadata changes
        self.metadata = LiveMetadata([Path(d) for d in config.log_dirs], self.node_id, clock_ms)

    def startup(self) -> list[Any]:
        self.dynamic_configs.load()  # before the logs open, so they start with the altered settings
        stats = self.logs.startup()
        if self.logs.kraft_image is not None:  # this start took over a Kafka node's log dir
            adopt_kafka_settings(self.logs.kraft_image, Path(self.config.log_dirs[0]), self.dynamic_configs,
                                 self.node_id, replace=self.logs.kraft_replaces_ours)
            # last: a crash before this point takes Kafka's metadata back again at the next start
            forget_export(Path(self.config.log_dirs[0]))
        if self.authorizer is not None:
            self.authorizer.load()  # before any listener serves a request
        self.cleaner.settings = cleaner_settings(self.config)  # with the persisted dynamic values
        self.cleaner.throttler.bytes_per_second = self.cleaner.settings.io_max_bytes_per_second
        follow_dynamic_configs(self.cleaner, self.config, self.dynamic_configs.on_change)
        self._follow_move_throttle(set())
        self.dynamic_configs.on_change(self._follow_move_throttle)
        self.cleaner.startup()
        self._producer_ids = ProducerIdBlock(Path(self.config.log_dirs[0]))
        self.scram = ScramStore(Path(self.config.log_dirs[0]) / SCRAM_FILE)
        self.quotas = ClientQuotas.from_config(self.config, Path(self.config.log_dirs[0]) / QUOTA_FILE)
        self.client_metrics.subscriptions = Subscriptions(Path(self.config.log_dirs[0]) / CLIENT_METRICS_FILE)
        self.client_metrics.subscriptions.load()
        self.shares.open(Path(self.config.log_dirs[0]))
        self.groups.coordinator.streams.group_configs = StreamsGroupConfigs(
            Path(self.config.log_dirs[0]) / STREAMS_GROUP_CONFIGS_FILE)
        # last, once every store holds what the log (or an adopted Kafka log) says: from now on every change
        # of a store is appended to the metadata log before it is answered
        self.metadata.open(None if self.logs.kraft_image is None else self.logs.kraft_image.source)
        return list(stats)

    def _follow_move_throttle(self, keys: set[str]) -> None:
        """`replica.alter.log.dirs.io.max.bytes.per.second`, at startup and when altered at runtime."""
        if not keys or "replica.alter.log.dirs.io.max.bytes.per.second" in keys:
            rate = float(self.config.get("replica.alter.log.dirs.io.max.bytes.per.second"))
            self.logs.moves.throttler.bytes_per_second = rate if rate < LONG_MAX else UNLIMITED

    @property
    def cluster_id(self) -> str:
        return str(self.logs.cluster_id)

    def next_producer_id(self) -> int:
        assert self._producer_ids is not None, "startup() not called"
        return self._producer_ids.next_id()

    def address_of(self, listener: str) -> tuple[str, int]:
        """The (host, port) a client connected on `listener` is told (Metadata, FindCoordinator): that
        listener's advertised address, as Kafka answers; the first listener's for a name we do not know."""
        host, port = self.advertised.get(listener) or next(iter(self.advertised.values()), ("", 0))
        return host or "127.0.0.1", port

    @property
    def advertised_port(self) -> int:
        return self.address_of("")[1]

    def set_advertised_port(self, port: int, listener: str | None = None) -> None:
        """After binding port 0 (tests), clients must be told the real port."""
        name = listener if listener is not None else next(iter(self.advertised))
        host, advertised_port = self.advertised[name]
        if advertised_port == 0:
            self.advertised[name] = (host, port)
