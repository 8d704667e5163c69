"""Differential conformance of broker configs, against Kafka 4.3.1 and kbroker: DescribeConfigs of
the broker's own entity and of the cluster-wide default entity, and dynamic changes with
IncrementalAlterConfigs and AlterConfigs - per broker and cluster-wide, what is refused and with
which message, and how a cluster-wide log.retention.ms reaches a topic. Kafka applies a change
through its metadata log a moment later, so reads after a change wait for it. Every change is
undone at the end: the brokers are shared by the session."""
from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import AlterConfigsRequest as A
from protocol.messages import DescribeConfigsRequest as D
from protocol.messages import IncrementalAlterConfigsRequest as I
from tests.support import unique

from .topics import create_topic

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND = 0, 1, 2
DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT = 2, 3, 5
INT, LONG = 3, 5


@pytest.fixture
def client(connect):
    return connect("broker-configs")


def alter(client, entity: str, configs: dict, op: int = SET, validate_only: bool = False):
    response = client.call(I(resources=[I.AlterConfigsResource(
        resource_type=BROKER, resource_name=entity,
        configs=[I.AlterableConfig(name=k, config_operation=op, value=v)
                 for k, v in configs.items()])], validate_only=validate_only), 1)
    [result] = response.responses
    return result.error_code, result.error_message


def replace(client, entity: str, configs: dict):
    response = client.call(A(resources=[A.AlterConfigsResource(
        resource_type=BROKER, resource_name=entity,
        configs=[A.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=False), 2)
    [result] = response.responses
    return result.error_code, result.error_message


def describe(client, resource_type: int, name: str, keys=None) -> dict:
    response = client.call(D(resources=[D.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)],
        include_synonyms=True, include_documentation=False), 4)
    [result] = response.results
    assert result.error_code == E.NONE, result
    return {c.name: (c.value, c.config_source, c.read_only, c.config_type,
                     [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs}


def eventually(read, expected, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if got == expected or time.monotonic() > deadline:
            assert got == expected
            return
        time.sleep(0.2)


def test_a_broker_describes_kafkas_defaults(target, client):
    got = describe(client, BROKER, "1", ["log.retention.ms", "log.cleaner.threads",
                                         "message.max.bytes", "num.io.threads",
                                         "min.insync.replicas", "log.retention.hours",
                                         "ssl.keystore.password"])
    assert got == {
        "log.retention.ms": (None, DEFAULT, False, LONG, []),
        "log.retention.hours": ("168", DEFAULT, True, INT, [("log.retention.hours", "168",
                                                             DEFAULT)]),
        "log.cleaner.threads": ("1", DEFAULT, False, INT, [("log.cleaner.threads", "1",
                                                            DEFAULT)]),
        "message.max.bytes": ("1048588", DEFAULT, False, INT,
                              [("message.max.bytes", "1048588", DEFAULT)]),
        "num.io.threads": ("8", DEFAULT, False, INT, [("num.io.threads", "8", DEFAULT)]),
        "min.insync.replicas": ("1", DYNAMIC_DEFAULT, False, INT,
                                [("min.insync.replicas", "1", DYNAMIC_DEFAULT),
                                 ("min.insync.replicas", "1", DEFAULT)]),
        "ssl.keystore.password": (None, DEFAULT, False, 9, []),
    }
    everything = describe(client, BROKER, "1")
    assert len(everything) == 340
    assert "console.enable" not in everything  # kbroker's own settings are not Kafka's
    assert describe(client, BROKER, "") == {
        "min.insync.replicas": ("1", DYNAMIC_DEFAULT, False, INT,
                                [("min.insync.replicas", "1", DYNAMIC_DEFAULT)])}


@pytest.mark.parametrize("entity,configs,op,answer", [
    ("1", {"log.dirs": "/x"}, SET,
     (E.INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs]")),
    ("1", {"log.cleaner.threads": "2", "log.dirs": "/y"}, SET,
     (E.INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs]")),
    ("", {"node.id": "5"}, SET,
     (E.INVALID_REQUEST, "Cannot update these configs dynamically: [node.id]")),
    ("1", {"log.cleaner.threads": "abc"}, SET,
     (E.INVALID_REQUEST, "Invalid value abc for configuration log.cleaner.threads: Not a "
                         "number of type INT")),
    ("2", {"log.cleaner.threads": "2"}, SET,
     (E.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2")),
    ("1", {"log.cleaner.threads": "2"}, APPEND,
     (E.INVALID_CONFIG, "Config value append is not allowed for config key: "
                        "log.cleaner.threads")),
    ("1", {"ssl.keystore.password": "secret"}, SET,
     (E.INVALID_REQUEST, "These security configs can be dynamically updated only per-listener "
                         "using the listener prefix: [ssl.keystore.password]")),
])
def test_what_kafka_refuses_to_change_at_runtime(target, client, entity, configs, op, answer):
    assert alter(client, entity, configs, op) == answer
    assert describe(client, BROKER, "1", ["log.cleaner.threads"])["log.cleaner.threads"][0] == "1"


def test_dynamic_values_per_broker_and_cluster_wide(target, client):
    topic = create_topic(client, unique("dyn-cfg"), 1)
    try:
        assert alter(client, "1", {"log.cleaner.threads": "2"}) == (E.NONE, None)
        assert alter(client, "", {"log.retention.ms": "700000000"}) == (E.NONE, None)
        assert alter(client, "1", {"log.cleanup.policy": "compact"}, APPEND) == (E.NONE, None)
        keys = ["log.cleaner.threads", "log.retention.ms", "log.cleanup.policy"]
        eventually(lambda: describe(client, BROKER, "1", keys), {
            "log.cleaner.threads": ("2", DYNAMIC_BROKER, False, INT,
                                    [("log.cleaner.threads", "2", DYNAMIC_BROKER),
                                     ("log.cleaner.threads", "1", DEFAULT)]),
            "log.retention.ms": ("700000000", DYNAMIC_DEFAULT, False, LONG,
                                 [("log.retention.ms", "700000000", DYNAMIC_DEFAULT),
                                  ("log.retention.hours", "168", DEFAULT)]),
            "log.cleanup.policy": ("delete,compact", DYNAMIC_BROKER, False, 7,
                                   [("log.cleanup.policy", "delete,compact", DYNAMIC_BROKER),
                                    ("log.cleanup.policy", "delete", DEFAULT)]),
        })
        assert describe(client, BROKER, "", ["log.retention.ms"]) == {
            "log.retention.ms": ("700000000", DYNAMIC_DEFAULT, False, LONG,
                                 [("log.retention.ms", "700000000", DYNAMIC_DEFAULT)])}
        # a topic without its own retention.ms follows the cluster-wide value
        assert describe(client, TOPIC, topic, ["retention.ms", "cleanup.policy"]) == {
            "retention.ms": ("700000000", DYNAMIC_DEFAULT, False, LONG,
                             [("log.retention.ms", "700000000", DYNAMIC_DEFAULT),
                              ("log.retention.hours", "168", DEFAULT)]),
            "cleanup.policy": ("delete,compact", DYNAMIC_BROKER, False, 7,
                               [("log.cleanup.policy", "delete,compact", DYNAMIC_BROKER),
                                ("log.cleanup.policy", "delete", DEFAULT)]),
        }
        # AlterConfigs replaces this broker's whole dynamic set: nothing left of it
        assert replace(client, "1", {}) == (E.NONE, None)
        eventually(lambda: describe(client, BROKER, "1", ["log.cleaner.threads"]), {
            "log.cleaner.threads": ("1", DEFAULT, False, INT,
                                    [("log.cleaner.threads", "1", DEFAULT)])})
    finally:
        alter(client, "1", {"log.cleaner.threads": None, "log.cleanup.policy": None}, DELETE)
        alter(client, "", {"log.retention.ms": None}, DELETE)
    eventually(lambda: describe(client, BROKER, "", ["log.retention.ms"]), {})
    eventually(lambda: describe(client, TOPIC, topic, ["retention.ms"]),
               {"retention.ms": ("604800000", DEFAULT, False, LONG, [])})


def test_validate_only_changes_nothing(target, client):
    assert alter(client, "1", {"log.cleaner.threads": "2"}, validate_only=True) == (E.NONE, None)
    time.sleep(0.5)
    assert describe(client, BROKER, "1", ["log.cleaner.threads"])["log.cleaner.threads"][:2] == \
        ("1", DEFAULT)


def kafka_configs(target, *args: str) -> str:
    """Kafka's own kafka-configs (kafka.admin.ConfigCommand) against the target."""
    import os
    import subprocess

    from .kafka_server import java_executable, resolve_kafka_jars
    libs = resolve_kafka_jars()
    classpath = os.pathsep.join(os.path.join(libs, n) for n in sorted(os.listdir(libs))
                                if n.endswith(".jar"))
    result = subprocess.run(
        [java_executable(), "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
         "kafka.admin.ConfigCommand", "--bootstrap-server", f"127.0.0.1:{target.port}", *args],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Exception" not in result.stdout + result.stderr
    return result.stdout


def test_kafka_configs_alters_and_describes_broker_configs(target, client):
    try:
        out = kafka_configs(target, "--alter", "--entity-type", "brokers", "--entity-name", "1",
                            "--add-config", "log.cleaner.threads=2")
        assert out.strip() == "Completed updating config for broker 1."
        out = kafka_configs(target, "--alter", "--entity-type", "brokers", "--entity-default",
                            "--add-config", "log.retention.ms=700000000")
        assert out.strip() == "Completed updating default config for brokers in the cluster."
        eventually(lambda: kafka_configs(target, "--describe", "--entity-type", "brokers",
                                         "--entity-name", "1"),
                   "Dynamic configs for broker 1 are:\n"
                   "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                   "log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}\n")
        assert kafka_configs(target, "--describe", "--entity-type", "brokers",
                             "--entity-default") == (
            "Default configs for brokers in the cluster are:\n"
            "  log.retention.ms=700000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "log.retention.ms=700000000}\n"
            "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "min.insync.replicas=1}\n")
    finally:
        alter(client, "1", {"log.cleaner.threads": None}, DELETE)
        alter(client, "", {"log.retention.ms": None}, DELETE)
    eventually(lambda: describe(client, BROKER, "", ["log.retention.ms"]), {})
