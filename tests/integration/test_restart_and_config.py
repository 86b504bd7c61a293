"""What a restart must keep besides records (topic configs, topic ids), and a Kafka-style properties file."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from tests.integration.brokers import BrokerProcess, api_versions_ok, free_port
from tests.integration.clients import kp_admin, kp_producer, kp_wait_for_topic


def test_topic_configs_and_ids_survive_a_restart(broker_factory: Callable[..., BrokerProcess],
                                                 new_topic: Callable[..., str]) -> None:
    broker = broker_factory(needs_restart=True)
    topic = new_topic()
    with kp_admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "4242",
                                                                   "message.timestamp.type": "LogAppendTime"})])
        topic_id = admin.describe_topics([topic])[0]["topic_id"]
    broker.restart()
    with kp_admin(broker.bootstrap) as admin:
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert configs["retention.ms"]["value"] == "4242"
        assert configs["message.timestamp.type"]["value"] == "LogAppendTime"
        assert admin.describe_topics([topic])[0]["topic_id"] == topic_id
    with kp_producer(broker.bootstrap) as producer:
        metadata = producer.send(topic, b"x", partition=1, timestamp_ms=5).get(timeout=10)
    assert metadata.timestamp > 5  # the LogAppendTime config is still in force


def test_server_properties_file_is_loaded_and_metrics_are_served(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    properties = tmp_path / "server.properties"
    properties.write_text(
        "# a Kafka-style file, including keys a single node ignores\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={tmp_path / 'data'}\n"
        "num.partitions=3\n"
        "zookeeper.connect=localhost:2181\n"
        "process.roles=broker,controller\n")
    proc = subprocess.Popen([sys.executable, "-m", "pybroker.broker.cli", "start", "--config", str(properties),
                             "--metrics-port", str(metrics_port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not api_versions_ok("127.0.0.1", port) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[0]
            time.sleep(0.05)
        with kp_producer(f"127.0.0.1:{port}") as producer:
            producer.send("from-properties", b"x").get(timeout=10)
        assert kp_wait_for_topic(f"127.0.0.1:{port}", "from-properties") == {0, 1, 2}
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as page:
            assert page.status == 200 and b"python_info" in page.read()
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0, output
    assert "zookeeper.connect" in output  # reported as a key we do not use, not an error
