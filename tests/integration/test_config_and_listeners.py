"""Configuration paths and listeners: flags, --override, files, env vars, two listeners."""
from __future__ import annotations

import subprocess
import sys

import pytest

from protocol import messages as m
from broker.cli import build_parser, resolve_config
from broker.config import ConfigError
from tests.support import ROOT, BrokerProcess, RawClient, free_port


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)


def test_help_lists_settings_by_kafka_name():
    result = run_cli("--help")
    assert result.returncode == 0
    for name in ("num.partitions", "auto.create.topics.enable", "message.max.bytes",
                 "log.retention.ms", "group.initial.rebalance.delay.ms"):
        assert name in result.stdout


@pytest.mark.parametrize("args,fragment", [
    (["--override", "no.such.setting=1"], "unknown setting 'no.such.setting'"),
    (["--override", "num.partitions=many"], "bad value 'many' for num.partitions"),
    (["--override", "auto.create.topics.enable=maybe"], "auto.create.topics.enable"),
    (["--listeners", "PLAINTEXT://127.0.0.1"], "has no port"),
    (["--override", "num.partitions"], "expects name=value"),
    (["--listeners", "INTERNAL://127.0.0.1:1"], "No security protocol defined for listener INTERNAL"),
    (["--listeners", "INTERNAL://127.0.0.1:1", "--override",
      "listener.security.protocol.map=INTERNAL:TLS"], "No enum constant for security protocol 'TLS'"),
    (["--override", "max.connections.per.ip=0"],
     "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides"),
    (["--override", "max.connections.per.ip.overrides=host.invalid:3", "--port", "0",
      "--metrics-port", "0"],
     "max.connections.per.ip.overrides: cannot resolve 'host.invalid'"),
])
def test_bad_settings_are_refused_at_start(args, fragment):
    result = run_cli(*args)
    assert result.returncode == 2
    assert fragment in result.stderr


def test_sources_are_layered_file_then_env_then_flags(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# comment\nnum.partitions=3\nlog.retention.ms=1000\nnode.id=7\n")
    args = build_parser().parse_args(["--config", str(props), "--node-id", "9",
                                      "--override", "log.retention.ms=2000"])
    env = {"KBROKER_NUM_PARTITIONS": "4", "KAFKA_GROUP_MAX_SIZE": "10"}
    config = resolve_config(args, env)
    assert config["num.partitions"] == 4          # env beats the file
    assert config["node.id"] == 9                 # a flag beats the file
    assert config["log.retention.ms"] == 2000     # --override beats the file
    assert config["group.max.size"] == 10         # Kafka-image style env name


def test_toml_config_file(tmp_path):
    path = tmp_path / "broker.toml"
    path.write_text('[broker]\n"num.partitions" = 5\n"auto.create.topics.enable" = false\n')
    config = resolve_config(build_parser().parse_args(["--config", str(path)]), {})
    assert config["num.partitions"] == 5
    assert config["auto.create.topics.enable"] is False


def test_advertised_listener_must_name_a_listener():
    args = build_parser().parse_args(["--advertised-listeners", "OTHER://broker:1"])
    with pytest.raises(ConfigError, match="names no listener"):
        resolve_config(args, {})


def test_two_listeners_each_advertise_their_own_address():
    internal, external = free_port(), free_port()
    proc = BrokerProcess(port=external, overrides={
        "listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
        "advertised.listeners": f"INTERNAL://broker.internal:{internal},"
                                f"EXTERNAL://localhost:{external}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "node.id": 3,
    })
    proc.start()
    try:
        for port, host in ((internal, "broker.internal"), (external, "localhost")):
            client = RawClient(port)
            metadata = client.call(m.MetadataRequest(topics=None), 12)
            assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(3, host, port)]
            assert metadata.controller_id == 3
            found = client.call(m.FindCoordinatorRequest(key="g", key_type=0), 3)
            assert (found.node_id, found.host, found.port) == (3, host, port)
            client.close()
    finally:
        assert proc.stop() == 0


def test_kbroker_environment_names_win_over_kafka_image_names():
    env = {"KBROKER_NUM_PARTITIONS": "4", "KAFKA_NUM_PARTITIONS": "8",
           "KAFKA_NODE_ID": "5"}
    config = resolve_config(build_parser().parse_args([]), env)
    assert config["num.partitions"] == 4
    assert config["node.id"] == 5


def test_kafka_image_variables_for_kafka_only_configs_are_taken_as_a_properties_file_is():
    """An apache/kafka compose file's environment carries over: Kafka configs this broker has no
    setting for are taken (log.retention.hours applies, num.network.threads is kept to be
    described as set), KAFKA_ variables that name no config (the JVM's) are not, and a
    kbroker setting still comes from its own variable."""
    env = {"KAFKA_LOG_RETENTION_HOURS": "2", "KAFKA_NUM_NETWORK_THREADS": "8",
           "KAFKA_PROCESS_ROLES": "broker,controller",
           "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
           "KAFKA_HEAP_OPTS": "-Xmx1G", "KAFKA_JMX_PORT": "9999", "KAFKA_NUM_PARTITIONS": "3"}
    config = resolve_config(build_parser().parse_args([]), env)
    assert config["log.retention.ms"] == 2 * 3_600_000
    assert config["num.partitions"] == 3
    assert config.kafka_only == {"log.retention.hours": "2", "num.network.threads": "8",
                                 "process.roles": "broker,controller",
                                 "controller.quorum.voters": "1@localhost:9093"}
    # a typo in a Kafka-image variable names no config: not read as one
    assert resolve_config(build_parser().parse_args([]),
                          {"KAFKA_NUM_NETWRK_THREADS": "8"}).kafka_only == {}


def test_debug_log_has_one_line_per_request_with_latency():
    import json
    proc = BrokerProcess(overrides={"log.level": "debug"})
    proc.start()
    try:
        client = RawClient(proc.port, client_id="latency-probe")
        client.call(m.MetadataRequest(topics=None), 12)
        client.close()
    finally:
        assert proc.stop() == 0
    lines = [json.loads(line) for line in proc.logs().splitlines() if line.startswith("{")]
    requests = [e for e in lines if e.get("event") == "request"
                and e.get("client_id") == "latency-probe"]
    assert [(e["api"], e["version"]) for e in requests] == [("Metadata", 12)]
    assert requests[0]["latency_ms"] >= 0


def test_a_kafka_server_properties_starts_it_and_its_settings_are_described_as_set(tmp_path):
    """Kafka's own broker configs this broker has no use for (thread counts, socket buffers)
    are accepted from a server.properties, described as set (STATIC_BROKER_CONFIG, as Kafka
    describes them) and named in one warning at start; log.retention.hours gives the retention
    as on Kafka; a name Kafka does not know either is still refused."""
    import json
    from tests.conformance.test_broker_configs_conformance import describe
    from tests.conformance import topics
    broker = BrokerProcess(overrides={"num.network.threads": "8", "num.io.threads": "16",
                                      "socket.send.buffer.bytes": "102400",
                                      "log.retention.hours": "24"})
    broker.start()
    try:
        client = RawClient(broker.port)
        described = describe(client, 4, "1", ["num.network.threads", "num.io.threads",
                                              "socket.send.buffer.bytes", "num.replica.fetchers"])
        assert {k: v[:2] for k, v in described.items()} == {
            "num.network.threads": ("8", 4), "num.io.threads": ("16", 4),
            "socket.send.buffer.bytes": ("102400", 4), "num.replica.fetchers": ("1", 5)}
        topic = topics.create_topic(client, "retention-from-hours", 1)
        retention = describe(client, 2, topic, ["retention.ms"])["retention.ms"]
        assert retention[0] == str(24 * 3_600_000), retention
        client.close()
        lines = [json.loads(line) for line in broker.logs().splitlines() if line.startswith("{")]
        warned = [line for line in lines if line.get("event", "").startswith("Kafka settings")]
        assert [w["settings"] for w in warned] == [
            ["num.io.threads", "num.network.threads", "socket.send.buffer.bytes"]]
        assert not [line for line in lines if line.get("level") == "error"]
    finally:
        broker.stop()
    refused = run_cli("--override", "num.netwrk.threads=8")
    assert refused.returncode == 2 and "unknown setting 'num.netwrk.threads'" in refused.stderr
