"""The one table of config definitions: every key we know, with type, default, validator, scope and doc.

The loader, DescribeConfigs, the CLI's help and the docs all read this table, so a key's default or
meaning cannot differ between them. Keys and defaults are Kafka's, so a `server.properties` written for
Kafka loads as it is. A topic-level key lists its broker-level synonyms (with a unit multiplier, for the
``*.hours`` / ``*.minutes`` forms) in the order Kafka resolves them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pybroker.config.host_counts import host_counts
from pybroker.config.types import LONG_MAX, Validator, at_least, between, each_of, one_of

HOUR_MS = 3_600_000
MINUTE_MS = 60_000
#: the acks=1 window's default (flush.ms): chosen from the bench's cost figures, README "The acks=1 window"
FLUSH_WINDOW_MS = 1_000


@dataclass(frozen=True, slots=True)
class ConfigDef:
    key: str
    type: str
    default: Any
    doc: str
    scope: str = "broker"  # "broker" or "topic"
    validator: Validator | None = None
    dynamic: bool = False
    #: topic keys: broker keys that stand in when the topic has no override, as (key, multiplier)
    synonyms: tuple[tuple[str, int], ...] = ()
    sensitive: bool = False
    #: may also be set for one listener, as `listener.name.<lowercase listener name>.<key>` (Kafka's prefix)
    per_listener: bool = False


def _b(key: str, type_: str, default: Any, doc: str, validator: Validator | None = None,
       dynamic: bool = False) -> ConfigDef:
    return ConfigDef(key, type_, default, doc, "broker", validator, dynamic)


def _ssl(key: str, type_: str, default: Any, doc: str, validator: Validator | None = None, *,
         dynamic: bool = False, secret: bool = False) -> ConfigDef:
    """A TLS key: settable per listener with Kafka's `listener.name.<name>.` prefix."""
    return ConfigDef(key, type_, default, doc, "broker", validator, dynamic, sensitive=secret, per_listener=True)


def _sasl(key: str, type_: str, default: Any, doc: str, validator: Validator | None = None, *,
          secret: bool = False) -> ConfigDef:
    """A SASL key: settable per listener with Kafka's `listener.name.<name>.` prefix."""
    return ConfigDef(key, type_, default, doc, "broker", validator, False, sensitive=secret, per_listener=True)


def _t(key: str, type_: str, default: Any, doc: str, synonyms: tuple[tuple[str, int], ...],
       validator: Validator | None = None) -> ConfigDef:
    return ConfigDef(key, type_, default, doc, "topic", validator, True, synonyms)


def _throttled_replicas(value: Any) -> str | None:
    """Kafka's form for the throttled-replica lists: `*`, or `partition:broker` pairs of integers."""
    items = [item.strip() for item in value or []]
    if items == ["*"]:
        return None
    for item in items:
        partition, sep, broker = item.partition(":")
        if not sep or not partition.isdigit() or not broker.isdigit():
            return "must be * or a list of partition:broker pairs"
    return None


def _minus_one_or_positive(value: Any) -> str | None:
    return None if value is None or value == -1 or value >= 1 else "must be -1 or at least 1"


_minus_one_or_positive.__doc__ = "-1 or [1,...]"


BROKER_DEFS: tuple[ConfigDef, ...] = (
    _b("node.id", "int", 1, "The node id of this broker (also accepted as broker.id).", at_least(0)),
    _b("broker.id", "int", -1, "Old name of node.id; used when node.id is not set.", at_least(-1)),
    _b("log.dirs", "list", None, "Directories in which partition logs are kept."),
    _b("log.dir", "string", "/tmp/kafka-logs", "The log directory used when log.dirs is not set."),
    _b("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], "Addresses the broker listens on."),
    _b("advertised.listeners", "list", None,
       "Addresses given to clients in Metadata; defaults to listeners."),
    _b("num.partitions", "int", 1, "Partitions of an auto-created topic.", at_least(1)),
    _b("default.replication.factor", "int", 1, "Replication factor of auto-created topics (1 here).",
       between(1, 1)),
    _b("auto.create.topics.enable", "boolean", True, "Create a topic when Metadata or Produce names it."),
    _b("delete.topic.enable", "boolean", True, "Allow DeleteTopics."),
    _b("socket.request.max.bytes", "int", 104_857_600, "Largest request the broker reads.", at_least(1)),
    # -- connections: memory, limits and timeouts (Kafka's SocketServer keys) --
    _b("queued.max.request.bytes", "long", 209_715_200,
       "Request bytes held in memory across all connections (frames being received and requests waiting "
       "to be handled); a connection whose next frame does not fit is not read until memory is released, "
       "first come first served. Frames up to 64 KiB are always admitted; a frame larger than the whole "
       "budget is admitted when no other large frame is held. Kafka's default is -1 (no limit), which let "
       "8 stalled 100 MB requests take 800 MB; ours, 200 MiB, holds two requests of the default largest "
       "size (socket.request.max.bytes) and is under 1% of a 24 GiB node. -1: no limit.",
       _minus_one_or_positive),
    _b("connections.max.idle.ms", "long", 600_000,
       "Close a connection that sent nothing and has no request in progress for this long; a frame "
       "that stops arriving half way is closed after min(30 s, this).", at_least(1)),
    _b("max.connections", "int", 2_147_483_647,
       "Connections the broker accepts in total; one more is closed at once. The open-file limit caps them "
       "too: of ulimit -n, a sixteenth (at least 256) is kept for the runtime and a quarter (at most the "
       "partition cap, or the partitions held if more) for partitions; at that budget a new connection "
       "replaces one idle for 3 s or more, or is refused.", at_least(0)),
    _b("max.connections.per.ip", "int", 2_147_483_647,
       "Connections accepted from one IP address; one more is closed at once.", at_least(0)),
    _b("max.connections.per.ip.overrides", "string", "",
       "Per-host exceptions to max.connections.per.ip, as host:count,host:count (IP or host name).",
       host_counts),
    _b("max.connection.creation.rate", "int", 2_147_483_647,
       "New connections the broker accepts per second, measured as the client quotas are "
       "(quota.window.num x quota.window.size.seconds); one over the rate is closed at once (Kafka delays "
       "the accept instead). Per IP: the connection_creation_rate quota of ip entities.", at_least(0)),
    _b("quota.window.num", "int", 11,
       "Client quotas: number of samples a client's byte rate is measured over (Kafka's).", at_least(1)),
    _b("quota.window.size.seconds", "int", 1,
       "Client quotas: seconds each sample of a client's byte rate covers (Kafka's).", at_least(1)),
    _b("socket.send.buffer.bytes", "int", 524_288,
       "SO_SNDBUF of accepted sockets (-1: OS default, which grows with the connection's rate up to "
       "net.ipv4.tcp_wmem's maximum). 512 KiB, which Linux doubles to 1 MiB for its bookkeeping: about one "
       "partition's answer (max.partition.fetch.bytes), so it leaves in one push, while the kernel's cost per "
       "byte stays low; the more a socket holds, the more each byte costs the sender. Measured on loopback "
       "with two librdkafka consumers, against the OS default: 1 KiB records over 16 partitions 1.08-1.15M "
       "instead of 0.91-0.94M msgs/s at 0.25-0.28 instead of 0.34-0.37 broker CPU s/GB, 10 KiB records "
       "197-199k instead of 175-178k at 0.23 instead of 0.29, over 256 partitions 2-10% more, over one "
       "partition the same (163k, the mean of eight runs each). Kafka's 102400 sent a 1 MB answer in "
       "~250 KB pieces, each after a wait for the socket to drain (one consumer's 1 MiB round trip took "
       "413-415 us, 278-289 on the OS default). Linux caps a fixed size at net.core.wmem_max (208 KiB on a stock "
       "kernel): there the default gives way to the OS default (a capped one did worse over one partition), "
       "and an explicit size is capped, with a warning at start."),
    _b("socket.receive.buffer.bytes", "int", -1,
       "SO_RCVBUF of accepted sockets (-1: OS default, which grows with the connection's rate up to "
       "net.ipv4.tcp_rmem's maximum). Not Kafka's 102400: a fixed size caps the TCP window, so a 1 MiB "
       "produce request arrived in ~100 KB pieces; measured, acks=all produce of 1 and 10 KiB records went "
       "14-22% faster on the OS default, with a quarter to a third less kernel CPU per byte (a fixed 1 MiB did as well, "
       "but Linux caps a fixed size at net.core.rmem_max, 208 KiB by default, which did no better than 100 KB)."),
    _b("num.network.threads", "int", 3, "Accepted for compatibility; the event loop does all network I/O.",
       at_least(1)),
    _b("num.io.threads", "int", 8, "Accepted for compatibility.", at_least(1)),
    _b("log.flush.scheduler.interval.ms", "long", LONG_MAX,
       "Accepted for compatibility: nothing polls the flush policy; the flush window wakes at each "
       "log's own flush.ms deadline.", at_least(0)),
    _b("log.flush.offset.checkpoint.interval.ms", "int", 60_000,
       "How often recovery points are checkpointed.", at_least(0)),
    _b("log.flush.start.offset.checkpoint.interval.ms", "int", 60_000,
       "How often log start offsets are checkpointed.", at_least(0)),
    _b("log.retention.check.interval.ms", "long", 300_000, "How often retention is checked.", at_least(1)),
    _b("log.roll.hours", "int", 168, "Hours before a new segment is rolled.", at_least(1)),
    _b("log.roll.ms", "long", None, "Milliseconds before a new segment is rolled; overrides log.roll.hours."),
    _b("log.roll.jitter.hours", "int", 0, "Jitter subtracted from the roll time.", at_least(0)),
    _b("log.roll.jitter.ms", "long", None, "Jitter in ms; overrides log.roll.jitter.hours."),
    _b("log.retention.hours", "int", 168, "Hours to keep a segment.", at_least(-1), True),
    _b("log.retention.minutes", "int", None, "Minutes to keep a segment; overrides hours.", None, True),
    _b("log.retention.ms", "long", None, "Milliseconds to keep a segment; overrides minutes.", None, True),
    _b("log.retention.bytes", "long", -1, "Bytes to keep per partition (-1: no limit).", None, True),
    _b("log.segment.bytes", "int", 1_073_741_824, "Largest segment file.", at_least(14), True),
    _b("log.index.size.max.bytes", "int", 10_485_760, "Largest offset index.", at_least(4), True),
    _b("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", at_least(0), True),
    _b("log.flush.interval.messages", "long", LONG_MAX,
       "Messages accumulated before an fsync (acks=1 and acks=0).", at_least(1), True),
    _b("log.flush.interval.ms", "long", None,
       "The acks=1 window: acks=1 and acks=0 data is fsynced at most this long after its first append "
       "(plus the fsync itself), so a power cut loses at most that much acknowledged data. null: the "
       f"topic default flush.ms, {FLUSH_WINDOW_MS} ms (Kafka's is never: replicas cover acks=1 there, and "
       "nothing does on one node); 9223372036854775807: off.", at_least(0), True),
    _b("log.segment.delete.delay.ms", "long", 60_000, "Delay before a deleted segment is unlinked.",
       at_least(0), True),
    _b("log.cleanup.policy", "list", ["delete"], "Default cleanup policy.", each_of("delete", "compact"), True),
    _b("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted topics."),
    _b("log.cleaner.threads", "int", 1, "Cleaner threads.", at_least(0), True),
    _b("log.cleaner.dedupe.buffer.size", "long", 134_217_728, "Memory of the cleaner's offset map.",
       at_least(0), True),
    _b("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308,
       "Cleaner I/O throttle.", None, True),
    _b("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX,
       "Bytes per second a move between log dirs (AlterReplicaLogDirs) may copy.", at_least(1), True),
    # kafka-reassign-partitions sets and clears these throttles around every reassignment (--verify deletes
    # them): one node replicates nothing, so they are accepted and described for the tools' sake
    _b("leader.replication.throttled.rate", "long", LONG_MAX,
       "Accepted for compatibility (no replication on one node): the leader's replication throttle.", at_least(0),
       True),
    _b("follower.replication.throttled.rate", "long", LONG_MAX,
       "Accepted for compatibility (no replication on one node): the follower's replication throttle.",
       at_least(0), True),
    _b("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio before a log is cleaned.",
       between(0, 1), True),
    _b("log.cleaner.delete.retention.ms", "long", 86_400_000, "How long tombstones are kept.",
       at_least(0), True),
    _b("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age before a record is compacted.",
       at_least(0), True),
    _b("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Maximum age before a record is compacted.",
       at_least(1), True),
    _b("log.cleaner.backoff.ms", "long", 15_000, "Cleaner sleep when there is nothing to clean.", at_least(0)),
    _b("log.cleaner.process.enable", "boolean", True,
       "Clean in a worker process, off the broker's interpreter lock (pybroker's own key); false: on the "
       "cleaner threads."),
    _b("log.cleaner.process.niceness", "int", 10,
       "Niceness the cleaner's worker process adds to its own, so request handling wins the CPU (pybroker's "
       "own key).", between(0, 19)),
    _b("log.message.timestamp.type", "string", "CreateTime", "Default timestamp type.",
       one_of("CreateTime", "LogAppendTime"), True),
    _b("log.message.timestamp.before.max.ms", "long", LONG_MAX,
       "How far in the past a record timestamp may be.", at_least(0), True),
    _b("log.message.timestamp.after.max.ms", "long", 3_600_000,
       "How far in the future a record timestamp may be.", at_least(0), True),
    _b("log.preallocate", "boolean", False, "Preallocate segment files.", None, True),
    _b("log.page.cache.max.bytes", "long", 4 << 30,
       "The most log data, newest first, the broker leaves in the OS page cache; older data is dropped "
       "from it as new data reaches the disk (fsynced, or for data nobody fsyncs, such as acks=1, written "
       "back), so new writes reuse freed pages, and a read of dropped data drops it again once sent "
       "(pybroker's own key; -1: leave it all to the OS, as Kafka does).",
       at_least(-1)),
    _b("message.max.bytes", "int", 1_048_588, "Largest record batch accepted.", at_least(0), True),
    _b("compression.type", "string", "producer", "Default compression of topics.",
       one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), True),
    _b("min.insync.replicas", "int", 1, "Accepted for compatibility; a single node is its own ISR.",
       at_least(1), True),
    _b("unclean.leader.election.enable", "boolean", False, "Accepted for compatibility.", None, True),
    _b("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", at_least(1)),
    _b("offsets.topic.replication.factor", "short", 1, "Accepted for compatibility.", at_least(1)),
    _b("offsets.topic.segment.bytes", "int", 104_857_600, "Segment size of __consumer_offsets.", at_least(1)),
    _b("offsets.retention.minutes", "int", 10_080, "How long offsets of empty groups are kept.", at_least(1)),
    _b("offsets.retention.ms", "long", None,
       "How long offsets of empty groups are kept, in ms; when set, it overrides offsets.retention.minutes."),
    _b("offsets.retention.check.interval.ms", "long", 600_000, "How often expired offsets are removed.",
       at_least(1)),
    _b("offset.metadata.max.bytes", "int", 4096, "Largest OffsetCommit metadata string."),
    _b("group.initial.rebalance.delay.ms", "int", 3000, "Wait for more members before the first rebalance."),
    _b("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for."),
    _b("group.max.session.timeout.ms", "int", 1_800_000, "Largest session timeout a member may ask for."),
    _b("group.max.size", "int", 2**31 - 1, "Most members in one group.", at_least(1)),
    # -- authorization (ACLs): off unless authorizer.class.name names Kafka's authorizer ------------
    _b("authorizer.class.name", "string", "",
       "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or the older "
       "kafka.security.authorizer.AclAuthorizer) checks every request against the ACLs; empty: none, "
       "and the ACL APIs answer SECURITY_DISABLED.",
       one_of("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "kafka.security.authorizer.AclAuthorizer")),
    _b("super.users", "string", "",
       "Principals allowed everything, separated by semicolons (User:admin;User:ops)."),
    _b("allow.everyone.if.no.acl.found", "boolean", False,
       "Whether an action on a resource that no ACL mentions is allowed (else denied)."),
    _b("transaction.state.log.num.partitions", "int", 50,
       "Partitions of the internal topic `__transaction_state`, made on first use (FindCoordinator or "
       "InitProducerId with a transactional id); a transactional id lives in partition "
       "abs(hashCode(id)) % this count, as in Kafka. An existing topic keeps its own count.", at_least(1)),
    _b("transaction.state.log.segment.bytes", "int", 104_857_600,
       "Segment size of `__transaction_state` (kept small so compaction keeps it short).", at_least(1)),
    _b("transaction.max.timeout.ms", "int", 900_000,
       "Longest transaction timeout a producer may ask for; InitProducerId with a longer one answers "
       "INVALID_TRANSACTION_TIMEOUT.", at_least(1)),
    _b("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000,
       "How often open transactions are checked against their timeout; one past it is aborted with its "
       "producer's epoch bumped (the producer is fenced).", at_least(1)),
    _b("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3_600_000,
       "How often transactional ids idle past transactional.id.expiration.ms are removed.", at_least(1)),
    _b("transaction.partition.verification.enable", "boolean", True,
       "Check every transactional produce against the coordinator: a partition not added to the open "
       "transaction is refused (KIP-890 part 1; Produce v12 adds it instead)."),
    _b("transaction.two.phase.commit.enable", "boolean", False,
       "Allow InitProducerId with enable_2pc (KIP-939): such a transaction has no timeout and survives "
       "its producer, to be committed or aborted by the client that resumes it (keep_prepared_txn). "
       "When false, enable_2pc is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED."),
    _b("transaction.state.log.replication.factor", "short", 1, "Accepted for compatibility.", at_least(1)),
    _b("transaction.state.log.min.isr", "int", 1, "Accepted for compatibility.", at_least(1)),
    _b("producer.id.expiration.ms", "int", 86_400_000, "Idle time before a producer id's state expires.",
       at_least(1), True),
    _b("transactional.id.expiration.ms", "int", 604_800_000,
       "Idle time (no transaction open, no state change) after which a transactional id's state is "
       "removed from `__transaction_state`.", at_least(1)),
    _b("process.roles", "list", ["broker", "controller"], "Accepted for compatibility (single node)."),
    _b("controller.quorum.voters", "list", [], "Accepted for compatibility."),
    _b("controller.listener.names", "list", [], "Accepted for compatibility."),
    _b("inter.broker.listener.name", "string", None, "Accepted for compatibility."),
    _b("num.recovery.threads.per.data.dir", "int", 2, "Accepted for compatibility.", at_least(1)),
    _b("group.coordinator.rebalance.protocols", "list", ["classic", "consumer", "streams"],
       "Group protocols the coordinator serves: classic (JoinGroup/SyncGroup), consumer (KIP-848's "
       "ConsumerGroupHeartbeat) and streams (KIP-1071's StreamsGroupHeartbeat); without consumer, "
       "ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION, and without streams, StreamsGroupHeartbeat does.",
       each_of("classic", "consumer", "share", "streams")),
    # -- the streams group protocol (KIP-1071) -------------------------------------------------------
    _b("group.streams.heartbeat.interval.ms", "int", 5000,
       "How often streams-protocol members heartbeat (the interval the coordinator tells them).", at_least(1)),
    _b("group.streams.session.timeout.ms", "int", 45000,
       "A streams-protocol member that has not heartbeated for this long is fenced: its tasks go to the "
       "others.", at_least(1)),
    _b("group.streams.max.size", "int", 2**31 - 1,
       "Most members in one streams group (GROUP_MAX_SIZE_REACHED beyond).", at_least(1)),
    _b("group.streams.num.standby.replicas", "int", 0,
       "Standby replicas of each stateful task in a streams group, each on another process than the "
       "task's active one (the client's num.standby.replicas does not apply under group.protocol=streams).",
       at_least(0)),
    _b("group.streams.min.session.timeout.ms", "int", 45000,
       "Smallest streams.session.timeout.ms a streams group may set for itself.", at_least(1)),
    _b("group.streams.max.session.timeout.ms", "int", 60000,
       "Largest streams.session.timeout.ms a streams group may set for itself.", at_least(1)),
    _b("group.streams.min.heartbeat.interval.ms", "int", 5000,
       "Smallest streams.heartbeat.interval.ms a streams group may set for itself.", at_least(1)),
    _b("group.streams.max.heartbeat.interval.ms", "int", 15000,
       "Largest streams.heartbeat.interval.ms a streams group may set for itself.", at_least(1)),
    _b("group.streams.max.standby.replicas", "int", 2,
       "Largest streams.num.standby.replicas a streams group may set for itself.", at_least(0)),
    _b("group.streams.rack.aware.assignment.tags", "list", [],
       "Client tag keys every streams-protocol member must carry (a member lacking one is told "
       "MISSING_CLIENT_TAGS in its heartbeats, v1); standbys are not placed by them, as Kafka 4.4's sticky "
       "assignor does not."),
    _b("group.streams.initial.rebalance.delay.ms", "int", 3000,
       "How long a new streams group waits for more members before its first task assignment.", at_least(0)),
    # -- the consumer group protocol (KIP-848) -------------------------------------------------------
    _b("group.consumer.heartbeat.interval.ms", "int", 5000,
       "How often consumer-protocol members heartbeat (the interval the coordinator tells them).", at_least(1)),
    _b("group.consumer.min.heartbeat.interval.ms", "int", 5000,
       "Smallest group.consumer.heartbeat.interval.ms allowed.", at_least(1)),
    _b("group.consumer.max.heartbeat.interval.ms", "int", 15000,
       "Largest group.consumer.heartbeat.interval.ms allowed.", at_least(1)),
    _b("group.consumer.session.timeout.ms", "int", 45000,
       "A consumer-protocol member that has not heartbeated for this long is fenced: its partitions go "
       "to the others.", at_least(1)),
    _b("group.consumer.min.session.timeout.ms", "int", 45000,
       "Smallest group.consumer.session.timeout.ms allowed.", at_least(1)),
    _b("group.consumer.max.session.timeout.ms", "int", 60000,
       "Largest group.consumer.session.timeout.ms allowed.", at_least(1)),
    _b("group.consumer.max.size", "int", 2**31 - 1,
       "Most members in one consumer-protocol group (GROUP_MAX_SIZE_REACHED beyond).", at_least(1)),
    _b("group.consumer.migration.policy", "string", "bidirectional",
       "Which online conversions of a group with members are allowed: upgrade (a classic group becomes a "
       "consumer group when a consumer-protocol member joins), downgrade (a consumer group left with classic "
       "members only becomes classic), both (bidirectional) or neither (disabled). Empty groups always convert.",
       one_of("disabled", "downgrade", "upgrade", "bidirectional")),
    _b("group.consumer.assignors", "list", ["uniform", "range"],
       "Server-side assignors of the consumer protocol, the first the default; a member may pick another "
       "with server_assignor. Kafka's class names (org.apache.kafka.coordinator.group.assignor."
       "UniformAssignor, ...RangeAssignor) are accepted too.",
       each_of("uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor")),
    # -- share groups (KIP-932) -----------------------------------------------------------------------
    _b("group.share.heartbeat.interval.ms", "int", 5000,
       "How often share group members heartbeat (the interval the coordinator tells them).", at_least(1)),
    _b("group.share.session.timeout.ms", "int", 45000,
       "A share group member that has not heartbeated for this long is removed, and the records it held "
       "are released.", at_least(1)),
    _b("group.share.max.size", "int", 200,
       "Most members in one share group (GROUP_MAX_SIZE_REACHED beyond).", at_least(1)),
    _b("group.share.record.lock.duration.ms", "int", 30000,
       "How long a share consumer holds a record it was handed (its acquisition lock) before the record is "
       "released for delivery to another member.", at_least(1000)),
    _b("group.share.delivery.count.limit", "int", 5,
       "How many times a record is handed out before it is archived instead of made available again.",
       at_least(2)),
    _b("group.share.partition.max.record.locks", "int", 2000,
       "Most records in flight (between a share-partition's start and end offsets) per share-partition; "
       "no new record is acquired beyond it.", at_least(100)),
    _b("group.share.max.share.sessions", "int", 2000,
       "Most share fetch sessions the broker keeps; a new one beyond it is refused "
       "(SHARE_SESSION_LIMIT_REACHED).", at_least(1)),
    _b("share.coordinator.state.topic.num.partitions", "int", 50,
       "Partitions of the internal topic `__share_group_state`, made on first use by a share group.",
       at_least(1)),
    _b("share.coordinator.state.topic.segment.bytes", "int", 104_857_600,
       "Segment size of `__share_group_state`.", at_least(1)),
    _b("share.coordinator.state.topic.replication.factor", "short", 1, "Accepted for compatibility.",
       at_least(1)),
    _b("share.coordinator.state.topic.min.isr", "short", 1, "Accepted for compatibility.", at_least(1)),
    # -- partition limits (a request, and the broker as a whole) --------------------------------------
    _b("max.partitions.per.request", "int", 10_000,
       "Most partitions one CreateTopics or CreatePartitions request (all its topics together) or one "
       "Metadata/Produce request's auto-created topics may make. A larger request is refused whole, "
       "before any work, with POLICY_VIOLATION (\"Unable to perform excessively large batch operation.\"), "
       "as Kafka's controller refuses a request that would write more than 10,000 records. Also the most "
       "partitions one fetch session may hold (KIP-227): a full fetch of more gets no session, an incremental "
       "fetch that would grow a session past it closes the session (FETCH_SESSION_ID_NOT_FOUND).", at_least(1)),
    _b("max.incremental.fetch.session.cache.slots", "int", 1000,
       "Most fetch sessions (KIP-227) the broker keeps (Kafka's name and default). When all slots are taken, a "
       "new session may only take the slot of one unused for 2 minutes, or of a smaller one over 2 minutes "
       "old; otherwise the consumer gets no session and goes on with full fetches.", at_least(0)),
    _b("max.request.partition.size.limit", "int", 2000,
       "Most partitions one DescribeTopicPartitions answer lists (Kafka's name and default): the request's "
       "own `response_partition_limit` is honoured up to this, and the rest is left for the next page "
       "(the answer's `next_cursor`).", at_least(1)),
    _b("telemetry.max.bytes", "int", 1_048_576,
       "Most bytes of metrics one PushTelemetry may carry (KIP-714, Kafka's name and default); a larger push "
       "is answered TELEMETRY_TOO_LARGE. Decompressed, a push may grow to 8 times this.", at_least(1)),
    _b("max.broker.partitions", "int", 10_000,
       "Most partitions this broker holds (KIP-578's name). A creation that would pass it is refused with "
       "POLICY_VIOLATION. The broker also keeps an open-file budget: at start it raises its soft "
       "open-file limit (ulimit -n) to the hard limit, and allows at most that limit minus a quarter "
       "(at least 256 descriptors) for partitions, leaving the rest for connections and segment reads; "
       "the smaller of the two caps applies.", at_least(1)),
    # -- listeners and TLS (Kafka's keys; each ssl.* key may be set for one listener with the
    #    listener.name.<lowercase name>. prefix, which wins over the unprefixed key) ----------------------
    _b("listener.security.protocol.map", "list",
       ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "SASL_SSL:SASL_SSL"],
       "Listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), as NAME:PROTOCOL "
       "pairs. When set, it replaces the default map: every listener name must be in it."),
    _ssl("ssl.keystore.type", "string", "JKS",
         "Format of the key store; only PEM is served (convert a JKS or PKCS12 store to PEM).",
         dynamic=True),
    _ssl("ssl.keystore.location", "string", None,
         "A PEM file holding the private key and the certificate chain of a TLS listener. Reloaded when "
         "the file changes (checked every few seconds): new connections get the new certificate, "
         "existing ones keep theirs.", dynamic=True),
    _ssl("ssl.keystore.certificate.chain", "password", None,
         "The certificate chain as inline PEM text (instead of ssl.keystore.location).", dynamic=True,
         secret=True),
    _ssl("ssl.keystore.key", "password", None,
         "The private key as inline PEM text (PKCS#8, encrypted with ssl.key.password or not), with "
         "ssl.keystore.certificate.chain.", dynamic=True, secret=True),
    _ssl("ssl.keystore.password", "password", None,
         "Password of a JKS/PKCS12 key store; not used with PEM (Kafka refuses it with a PEM file). "
         "Never shown.", dynamic=True, secret=True),
    _ssl("ssl.key.password", "password", None,
         "Password of the encrypted private key (PEM). Never shown.", dynamic=True, secret=True),
    _ssl("ssl.truststore.type", "string", "JKS", "Format of the trust store; only PEM is served."),
    _ssl("ssl.truststore.location", "string", None,
         "A PEM file of the CA certificates that client certificates must chain to (mutual TLS); "
         "without one (and without ssl.truststore.certificates) the system CAs are trusted."),
    _ssl("ssl.truststore.certificates", "password", None,
         "The trusted CA certificates as inline PEM text (instead of ssl.truststore.location).",
         secret=True),
    _ssl("ssl.truststore.password", "password", None,
         "Password of a JKS/PKCS12 trust store; not used with PEM. Never shown.", secret=True),
    _ssl("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"],
         "TLS versions a listener accepts. Older ones (TLSv1, TLSv1.1) are ignored: the TLS library refuses "
         "them."),
    _ssl("ssl.protocol", "string", "TLSv1.3", "Accepted for compatibility; ssl.enabled.protocols decides."),
    _ssl("ssl.cipher.suites", "list", [],
         "TLS 1.2 cipher suites a listener accepts, by their IANA (Kafka/Java) or OpenSSL names; empty: "
         "the TLS library's defaults. A list without any TLS 1.3 suite turns TLS 1.3 off; TLS 1.3 suites "
         "themselves cannot be narrowed (the TLS library always offers its TLS 1.3 defaults)."),
    _ssl("ssl.client.auth", "string", "none",
         "Mutual TLS: required (a client without a certificate that chains to the trust store is "
         "refused), requested (a certificate is asked for and checked if given) or none.",
         one_of("none", "requested", "required")),
    _ssl("ssl.principal.mapping.rules", "string", "DEFAULT",
         "How a client certificate's distinguished name (RFC 2253, e.g. CN=alice,OU=eng,O=Example) "
         "becomes the principal User:<name>: comma-separated RULE:pattern/replacement/[LU] rules and "
         "DEFAULT (the whole name), the first that matches wins; none matching refuses the connection."),
    _ssl("ssl.endpoint.identification.algorithm", "string", "https",
         "Accepted for compatibility (clients check the broker's host name; the broker does not check "
         "client host names)."),
    # -- SASL authentication (SASL_PLAINTEXT / SASL_SSL listeners; the _sasl keys may be set for one
    #    listener with the listener.name.<lowercase name>. prefix) --------------------------------------------
    _sasl("sasl.enabled.mechanisms", "list", ["GSSAPI"],
       "SASL mechanisms a SASL listener accepts: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (GSSAPI, Kafka's "
       "default, is not served: a SASL listener must name its mechanisms). Per listener: "
       "listener.name.<listener>.sasl.enabled.mechanisms."),
    _sasl("sasl.jaas.config", "password", None,
          "JAAS config of the SASL listeners: PLAIN's users as "
          "org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>=\"<password>\"; "
          "Per listener and mechanism: listener.name.<listener>.plain.sasl.jaas.config. Never shown.",
          secret=True),
    _b("sasl.oauthbearer.jwks.endpoint.url", "string", None,
       "OAUTHBEARER: the JSON Web Key Set whose RSA keys sign the tokens, as a file:// URL (re-read when the "
       "file changes). Tokens must be RS256/RS384/RS512 JWTs with an exp claim."),
    _b("sasl.oauthbearer.expected.issuer", "string", None, "OAUTHBEARER: the iss claim a token must carry."),
    _b("sasl.oauthbearer.expected.audience", "list", [],
       "OAUTHBEARER: audiences of which a token's aud claim must name one (empty: not checked)."),
    _b("sasl.oauthbearer.sub.claim.name", "string", "sub",
       "OAUTHBEARER: the claim whose value is the principal's name (User:<value>)."),
    _b("sasl.oauthbearer.clock.skew.seconds", "int", 30,
       "OAUTHBEARER: seconds of clock difference allowed when checking exp, iat and nbf.", at_least(0)),
    _sasl("connections.max.reauth.ms", "long", 0,
       "Lifetime of a SASL session (KIP-368): told to the client in SaslAuthenticate v1+; a connection "
       "that has not re-authenticated by then is closed on its next request. 0: sessions never expire.",
       at_least(0)),
    _sasl("sasl.server.max.receive.size", "int", 524_288,
       "Largest frame a SASL listener accepts before the client has authenticated; a larger one closes the "
       "connection, so an anonymous client cannot make the broker hold socket.request.max.bytes.", at_least(1)),
    _sasl("connection.failed.authentication.delay.ms", "int", 100,
       "Delay before the answer to a failed authentication is sent and the connection closed, to slow "
       "password guessing (the event loop is not blocked).", at_least(0)),
    # -- the web console (pybroker's own; docs/console.md) ------------------------------------------
    _b("console.enable", "boolean", True,
       "Serve the web console: under /console on the metrics port (loopback peers only there) and, when "
       "console.port is set, on a port of its own."),
    _b("console.port", "int", -1,
       "A port of its own for the web console (also --console-port); -1: none, 0: any free port.",
       between(-1, 65535)),
    _b("console.host", "string", "127.0.0.1",
       "Address the console's own port binds to. A loopback address also makes the console refuse requests "
       "whose Host is not a loopback name (DNS rebinding)."),
    # -- the schema registry (Confluent's REST API; docs/schema-registry.md) -------------------------
    _b("schema.registry.port", "int", -1,
       "Serve the schema registry (Confluent's REST API) on this port; -1: off, 0: any free port.",
       between(-1, 65535)),
    _b("schema.registry.host", "string", "127.0.0.1", "Address the schema registry's port binds to."),
    _b("schema.registry.ssl.listener", "string", "",
       "A listener (such as SSL) whose TLS key store, trust store and client-auth setting the registry's port "
       "serves HTTPS with; empty: plain HTTP."),
    _b("schema.registry.topic", "string", "_schemas",
       "The compacted topic the registry keeps its schemas, configs and modes in (Confluent's kafkastore.topic)."),
    _b("schema.registry.validate.payload", "boolean", False,
       "On topics with confluent.key/value.schema.validation on, also decode each key/value with its "
       "registered schema (Avro, JSON Schema, Protobuf) and refuse records that do not match."),
    # -- Iceberg topics (pybroker's own keys, after Redpanda's names; docs/iceberg.md) ---------------
    _b("iceberg.enable", "boolean", True,
       "Run the Iceberg worker process for topics whose iceberg.mode is not disabled (Redpanda's "
       "iceberg_enabled). false: no table is kept, whatever the topics say."),
    _b("iceberg.catalog.type", "string", "sql",
       "The Iceberg catalog: sql (SQLAlchemy; by default a SQLite file in the first log dir) or rest (an "
       "Iceberg REST catalog at iceberg.catalog.uri).", one_of("sql", "rest")),
    _b("iceberg.catalog.uri", "string", "",
       "The catalog's address: a SQLAlchemy URL for sql (empty: sqlite:///<first log dir>/iceberg/catalog.db), "
       "the REST endpoint for rest."),
    _b("iceberg.catalog.namespace", "string", "pybroker",
       "The namespace (database) the topics' tables are made in; a topic's table is <namespace>.<topic>."),
    _b("iceberg.warehouse", "string", "",
       "Where data and metadata files go: a file:// or s3:// URL (empty: file://<first log dir>/iceberg/warehouse)."),
    _b("iceberg.s3.endpoint", "string", "",
       "An S3-compatible object store's endpoint for an s3:// warehouse (empty: the SDK's default)."),
    _b("iceberg.s3.region", "string", "us-east-1", "The object store's region for an s3:// warehouse."),
    _b("iceberg.s3.access.key.id", "string", "", "The access key id for an s3:// warehouse."),
    ConfigDef("iceberg.s3.secret.access.key", "password", None,
              "The secret access key for an s3:// warehouse (never logged, never described).", sensitive=True),
    _b("iceberg.commit.interval.ms", "long", 60_000,
       "Default of the topic key iceberg.commit.interval.ms (Redpanda's iceberg_catalog_commit_interval_ms).",
       at_least(100), True),
    _b("iceberg.dlq.table.suffix", "string", "~dlq",
       "Suffix of a topic's dead-letter table, which holds the records that do not decode."),
    _b("iceberg.process.niceness", "int", 10,
       "Niceness the Iceberg worker process adds to its own, so request handling wins the CPU.", between(0, 19)),
)

#: Confluent's subject name strategies (their class names are the values of the topic keys)
SUBJECT_NAME_STRATEGIES = tuple(f"io.confluent.kafka.serializers.subject.{name}" for name in
                                ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"))

TOPIC_DEFS: tuple[ConfigDef, ...] = (
    _t("cleanup.policy", "list", ["delete"], "delete and/or compact.",
       (("log.cleanup.policy", 1),), each_of("delete", "compact")),
    _t("confluent.key.schema.validation", "boolean", False,
       "Refuse records whose key is not framed with a schema id registered under the topic's key subject.", ()),
    _t("confluent.value.schema.validation", "boolean", False,
       "Refuse records whose value is not framed with a schema id registered under the topic's value subject.", ()),
    _t("confluent.key.subject.name.strategy", "string", "io.confluent.kafka.serializers.subject.TopicNameStrategy",
       "How the key's subject is named (TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy).", (),
       one_of(*SUBJECT_NAME_STRATEGIES)),
    _t("confluent.value.subject.name.strategy", "string",
       "io.confluent.kafka.serializers.subject.TopicNameStrategy",
       "How the value's subject is named (TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy).", (),
       one_of(*SUBJECT_NAME_STRATEGIES)),
    _t("compression.type", "string", "producer", "Compression of stored batches (producer: as sent).",
       (("compression.type", 1),), one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _t("delete.retention.ms", "long", 86_400_000, "How long tombstones are kept.",
       (("log.cleaner.delete.retention.ms", 1),), at_least(0)),
    _t("file.delete.delay.ms", "long", 60_000, "Delay before a deleted segment is unlinked.",
       (("log.segment.delete.delay.ms", 1),), at_least(0)),
    _t("flush.messages", "long", LONG_MAX, "Messages accumulated before an fsync.",
       (("log.flush.interval.messages", 1),), at_least(1)),
    _t("flush.ms", "long", FLUSH_WINDOW_MS,
       "The acks=1 window: acks=1 and acks=0 data is fsynced at most this long after its first append.",
       (("log.flush.interval.ms", 1),), at_least(0)),
    _t("index.interval.bytes", "int", 4096, "Bytes between offset index entries.",
       (("log.index.interval.bytes", 1),), at_least(0)),
    _t("max.compaction.lag.ms", "long", LONG_MAX, "Maximum age before a record is compacted.",
       (("log.cleaner.max.compaction.lag.ms", 1),), at_least(1)),
    _t("max.message.bytes", "int", 1_048_588, "Largest record batch accepted.",
       (("message.max.bytes", 1),), at_least(0)),
    _t("message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.",
       (("log.message.timestamp.type", 1),), one_of("CreateTime", "LogAppendTime")),
    _t("message.timestamp.before.max.ms", "long", LONG_MAX, "How far in the past a timestamp may be.",
       (("log.message.timestamp.before.max.ms", 1),), at_least(0)),
    _t("message.timestamp.after.max.ms", "long", 3_600_000, "How far in the future a timestamp may be.",
       (("log.message.timestamp.after.max.ms", 1),), at_least(0)),
    _t("follower.replication.throttled.replicas", "list", [],
       "Accepted for compatibility (kafka-reassign-partitions sets it): replicas throttled on followers.", (),
       _throttled_replicas),
    _t("leader.replication.throttled.replicas", "list", [],
       "Accepted for compatibility (kafka-reassign-partitions sets it): replicas throttled on the leader.", (),
       _throttled_replicas),
    _t("min.cleanable.dirty.ratio", "double", 0.5, "Dirty ratio before the log is cleaned.",
       (("log.cleaner.min.cleanable.ratio", 1),), between(0, 1)),
    _t("min.compaction.lag.ms", "long", 0, "Minimum age before a record is compacted.",
       (("log.cleaner.min.compaction.lag.ms", 1),), at_least(0)),
    _t("min.insync.replicas", "int", 1, "Accepted for compatibility.",
       (("min.insync.replicas", 1),), at_least(1)),
    _t("preallocate", "boolean", False, "Preallocate segment files.", (("log.preallocate", 1),)),
    _t("retention.bytes", "long", -1, "Bytes to keep per partition (-1: no limit).",
       (("log.retention.bytes", 1),)),
    _t("retention.ms", "long", 604_800_000, "Milliseconds to keep a segment (-1: forever).",
       (("log.retention.ms", 1), ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)),
       at_least(-1)),
    _t("segment.bytes", "int", 1_073_741_824, "Largest segment file.", (("log.segment.bytes", 1),),
       at_least(14)),
    _t("segment.index.bytes", "int", 10_485_760, "Largest offset index.",
       (("log.index.size.max.bytes", 1),), at_least(4)),
    _t("segment.jitter.ms", "long", 0, "Jitter subtracted from segment.ms.",
       (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)), at_least(0)),
    _t("segment.ms", "long", 604_800_000, "Milliseconds before a new segment is rolled.",
       (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)), at_least(1)),
    _t("unclean.leader.election.enable", "boolean", False, "Accepted for compatibility.",
       (("unclean.leader.election.enable", 1),)),
    _t("iceberg.mode", "string", "disabled",
       "Keep an Apache Iceberg table of the topic (Redpanda's redpanda.iceberg.mode): disabled, key_value "
       "(key and value as binary columns beside the Kafka coordinates), value_schema_id_prefix or "
       "value_schema_latest (the value decoded by its registered schema).", (),
       one_of("disabled", "key_value", "value_schema_id_prefix", "value_schema_latest")),
    _t("iceberg.commit.interval.ms", "long", 60_000,
       "How often the topic's committed records become an Iceberg snapshot.",
       (("iceberg.commit.interval.ms", 1),), at_least(100)),
    _t("iceberg.partition.spec", "string", "(hour(timestamp))",
       "How the topic's table is partitioned: by the hour or the day of the record timestamp, or not at all "
       "(Redpanda's redpanda.iceberg.partition.spec).", (),
       one_of("(hour(timestamp))", "(day(timestamp))", "()")),
    _t("iceberg.invalid.record.action", "string", "dlq_table",
       "What becomes of a record whose value does not decode: dlq_table (a row of the dead-letter table) or "
       "drop (Redpanda's redpanda.iceberg.invalid.record.action).", (), one_of("dlq_table", "drop")),
)

BROKER: dict[str, ConfigDef] = {d.key: d for d in BROKER_DEFS}
TOPIC: dict[str, ConfigDef] = {d.key: d for d in TOPIC_DEFS}
