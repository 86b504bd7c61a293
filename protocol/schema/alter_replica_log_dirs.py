"""AlterReplicaLogDirs (key 34), versions 1-2; flexible from v2.

v1 is v0 again (Kafka 4 dropped v0; v1 answers before throttling on a quota violation). Each log dir
path names the partitions to move there; the answer is per topic and partition.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("AlterReplicaLogDirsRequest", 34, "request", "1-2", "2+", [
    F("dirs", "[]AlterReplicaLogDir", fields=[
        F("path", "string"),
        F("topics", "[]AlterReplicaLogDirTopic", fields=[
            F("name", "string"),
            F("partitions", "[]int32"),
        ]),
    ]),
])

RESPONSE = M("AlterReplicaLogDirsResponse", 34, "response", "1-2", "2+", [
    F("throttle_time_ms", "int32"),
    F("results", "[]AlterReplicaLogDirTopicResult", fields=[
        F("topic_name", "string"),
        F("partitions", "[]AlterReplicaLogDirPartitionResult", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ]),
])
