"""How both brokers are configured for a scenario: its `setting` names one of these (registry.Scenario).

`plain` is a PLAINTEXT listener with defaults; `secured` a SASL_PLAINTEXT listener with PLAIN users and the ACL
authorizer (Kafka's StandardAuthorizer; the same class name in pybroker's config), `admin` a super user and
`alice` a user with no ACLs. Kafka's node also keeps a PLAINTEXT listener for its own broker-to-controller
traffic, whose ANONYMOUS principal is therefore a super user there; the scenarios never use it. `scram` is
`secured` with SCRAM-SHA-256 and SCRAM-SHA-512 enabled beside PLAIN (the super user logs in with PLAIN to make
the SCRAM credentials a scenario needs). Both are told the same `ALIKE` keys. Tests make their own users: these passwords exist only in these test brokers.
"""

from __future__ import annotations

# what both brokers are told beyond their defaults: one partition for each internal topic, so that a fresh
# pybroker per scenario makes its coordinators' topics in milliseconds (no answer compared shows the count)
ALIKE = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
         "group.initial.rebalance.delay.ms": "0"}
SETTINGS = ("plain", "secured", "scram")
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{user}="{password}"' for user, password in USERS.items()) + ";")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SECURED = {
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": AUTHORIZER,
}
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
# the SASL keys of each secured setting
SASL = {
    "secured": SECURED,
    "scram": {**SECURED, "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
              "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_LOGIN,
              "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_LOGIN},
}


def pybroker_config(setting: str) -> dict[str, str]:
    if setting == "plain":
        return {"listeners": "PLAINTEXT://127.0.0.1:0", **ALIKE}
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "super.users": "User:admin", **SASL[setting], **ALIKE}


def kafka_overrides(setting: str, node_port: int, controller_port: int, client_port: int) -> dict[str, str]:
    """Kafka's keys beyond tests/kafka_node.py's: for `secured` and `scram`, a SASL_PLAINTEXT client
    listener on `client_port` beside the PLAINTEXT one its broker and controller use."""
    if setting == "plain":
        return dict(ALIKE)
    return {
        "listeners": (f"PLAINTEXT://127.0.0.1:{node_port},CONTROLLER://127.0.0.1:{controller_port},"
                      f"SASL_PLAINTEXT://127.0.0.1:{client_port}"),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node_port},SASL_PLAINTEXT://127.0.0.1:{client_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "super.users": "User:ANONYMOUS;User:admin",
        **SASL[setting], **ALIKE,
    }
