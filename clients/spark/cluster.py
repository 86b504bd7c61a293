"""The sink's view of the cluster: connections per node, partition leaders, coordinators, and retries.

Why a class of its own: the transactional producer (on executors) and the transaction completer (on the
driver) both need "a connection to the leader of t-p" and "a connection to the coordinator of this
transactional id / group", refreshed when the broker says the answer moved (NOT_LEADER_OR_FOLLOWER,
NOT_COORDINATOR), and both retry the same retriable errors with the same backoff until a deadline. Kept
here once, so the producer reads as the transaction protocol and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pybroker.clients.wire import BrokerError, Connection, WireError
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

T = TypeVar("T")

GROUP, TRANSACTION = 0, 1  # FindCoordinator key types

#: errors after which the same request may succeed later (Kafka's RetriableException family)
RETRIABLE = frozenset({
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.UNSTABLE_OFFSET_COMMIT,
    ErrorCode.THROTTLING_QUOTA_EXCEEDED,
})
#: errors that mean "ask again where the coordinator / leader is"
MOVED = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                   ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long one request may take, how long a whole retried operation may take, the first backoff."""

    request_s: float = 30.0
    operation_s: float = 120.0
    backoff_s: float = 0.05
    max_backoff_s: float = 1.0


#: how the connector names itself in ApiVersions, its connections' default client id, and the largest answer
#: it accepts (no answer it asks for comes near it; a larger size prefix is a broken or hostile peer)
SOFTWARE = ("pybroker-spark", "1")
CLIENT_ID = "pybroker-spark-sink"
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


def connect(host: str, port: int, *, timeout_s: float, client_id: str = CLIENT_ID) -> Connection:
    """A connection as the connector opens them (the wire client with the connector's name and cap)."""
    return Connection(host, port, timeout_s=timeout_s, client_id=client_id, software=SOFTWARE,
                      max_response_bytes=MAX_RESPONSE_BYTES)


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


class Cluster:
    """Connections to the brokers of one cluster, opened lazily, re-opened after a failure."""

    def __init__(self, bootstrap: Sequence[str], timeouts: Timeouts = Timeouts(),
                 connect: Callable[..., Connection] = connect, *, auto_create: bool = True) -> None:
        if not bootstrap:
            raise ValueError("no bootstrap servers")
        self.bootstrap = [_host_port(a) for a in bootstrap]
        self.timeouts = timeouts
        #: Metadata asks the broker to create a missing topic (the sink); a reader never does
        self.auto_create = auto_create
        self._connect_to = connect
        self._by_address: dict[tuple[str, int], Connection] = {}
        self._nodes: dict[int, tuple[str, int]] = {}
        #: topic -> partition -> leader node id
        self._leaders: dict[str, dict[int, int]] = {}
        self._coordinators: dict[tuple[int, str], int] = {}

    # -- connections ---------------------------------------------------------------------------------
    def _connect(self, address: tuple[str, int]) -> Connection:
        conn = self._by_address.get(address)
        if conn is None or conn.closed:
            conn = self._by_address[address] = self._connect_to(*address, timeout_s=self.timeouts.request_s)
        return conn

    def any(self) -> Connection:
        """A connection to some broker: an open one, else the bootstrap servers in turn."""
        for conn in self._by_address.values():
            if not conn.closed:
                return conn
        errors = []
        for address in [*self.bootstrap, *(a for a in self._nodes.values() if a not in self.bootstrap)]:
            try:
                return self._connect(address)
            except WireError as exc:
                errors.append(str(exc))
        raise WireError("no broker reachable: " + "; ".join(errors))

    def node(self, node_id: int) -> Connection:
        address = self._nodes.get(node_id)
        if address is None:
            self.refresh(())
            address = self._nodes.get(node_id)
            if address is None:
                raise BrokerError(ErrorCode.LEADER_NOT_AVAILABLE, f"node {node_id} is not in the metadata")
        return self._connect(address)

    def node_ids(self) -> list[int]:
        """The brokers the last metadata named."""
        return sorted(self._nodes)

    def close(self) -> None:
        for conn in self._by_address.values():
            conn.close()
        self._by_address.clear()

    # -- metadata ------------------------------------------------------------------------------------
    def refresh(self, topics: Iterable[str]) -> None:
        """Fetch brokers and the partitions and leaders of `topics` (none: brokers only)."""
        conn = self.any()
        version = conn.version(MetadataRequest, minimum=4)
        names = sorted(set(topics))
        # as Kafka's producer asks: a broker with auto.create.topics.enable creates a missing topic, as it does
        # for the at-least-once write (kafka-python asks the same)
        answer = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in names],
                                              allow_auto_topic_creation=self.auto_create), version)
        assert isinstance(answer, MetadataResponse)
        self._nodes.update({b.node_id: (b.host, b.port) for b in answer.brokers})
        for topic in answer.topics:
            if topic.error_code != ErrorCode.NONE or topic.name is None:
                self._leaders.pop(topic.name or "", None)
                if topic.error_code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE):
                    raise BrokerError(topic.error_code, f"metadata of topic {topic.name!r}")
                continue
            self._leaders[topic.name] = {p.partition_index: p.leader_id for p in topic.partitions}

    def partitions(self, topic: str) -> int:
        """How many partitions `topic` has (a missing topic is UNKNOWN_TOPIC_OR_PARTITION, retriable)."""
        if topic not in self._leaders:
            self.refresh([topic])
        count = len(self._leaders.get(topic, ()))
        if count == 0:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r}")
        return count

    def leader(self, topic: str, partition: int) -> Connection:
        leaders = self._leaders.get(topic)
        if leaders is None or partition not in leaders:
            self.refresh([topic])
            leaders = self._leaders.get(topic, {})
        if partition not in leaders:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
        if leaders[partition] < 0:
            raise BrokerError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition}")
        return self.node(leaders[partition])

    def forget(self, topic: str) -> None:
        self._leaders.pop(topic, None)

    # -- coordinators --------------------------------------------------------------------------------
    def coordinator(self, key_type: int, key: str) -> Connection:
        node_id = self._coordinators.get((key_type, key))
        if node_id is None:
            node_id = self._find_coordinator(key_type, key)
            self._coordinators[(key_type, key)] = node_id
        return self.node(node_id)

    def _find_coordinator(self, key_type: int, key: str) -> int:
        conn = self.any()
        version = conn.version(FindCoordinatorRequest, minimum=1)
        what = f"FindCoordinator({'transaction' if key_type == TRANSACTION else 'group'} {key!r})"
        if version >= 4:
            answer = conn.request(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), version)
            assert isinstance(answer, FindCoordinatorResponse)
            if len(answer.coordinators) != 1:
                raise BrokerError(ErrorCode.COORDINATOR_NOT_AVAILABLE, what, "answer names no coordinator")
            found = answer.coordinators[0]
            error, message, node_id, host, port = (found.error_code, found.error_message, found.node_id,
                                                   found.host, found.port)
        else:
            answer = conn.request(FindCoordinatorRequest(key=key, key_type=key_type), version)
            assert isinstance(answer, FindCoordinatorResponse)
            error, message, node_id, host, port = (answer.error_code, answer.error_message, answer.node_id,
                                                   answer.host, answer.port)
        if error != ErrorCode.NONE:
            raise BrokerError(error, what, message)
        self._nodes[node_id] = (host, port)
        return node_id

    def forget_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)

    # -- retries -------------------------------------------------------------------------------------
    def retry(self, what: str, attempt: Callable[[], T], *, on_moved: Callable[[], None] | None = None) -> T:
        """`attempt()` until it succeeds, a non-retriable error, or `timeouts.operation_s` are spent.

        A retriable BrokerError or a WireError (the connection is re-opened next time) sleeps a growing
        backoff; MOVED errors first call `on_moved` (forget the coordinator or leader) so the next try
        asks where it went.
        """
        deadline = time.monotonic() + self.timeouts.operation_s
        backoff = self.timeouts.backoff_s
        while True:
            try:
                return attempt()
            except (BrokerError, WireError) as exc:
                if isinstance(exc, BrokerError) and exc.code not in RETRIABLE:
                    raise
                if (isinstance(exc, WireError) or exc.code in MOVED) and on_moved is not None:
                    on_moved()
                if time.monotonic() + backoff > deadline:
                    raise TimeoutError(f"{what}: still failing after {self.timeouts.operation_s:g} s; "
                                       f"last error: {exc}") from exc
                time.sleep(backoff)
                backoff = min(backoff * 2, self.timeouts.max_backoff_s)
