"""kafka-python's admin client describes and updates cluster features (ApiVersions,
UpdateFeatures); the levels it sets hold after a restart with --data-dir."""
from __future__ import annotations

import pytest

from tests.support import BrokerProcess


@pytest.fixture
def broker(tmp_path):
    proc = BrokerProcess(data_dir=str(tmp_path / "data"))
    proc.start()
    yield proc
    proc.stop()


def admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="features-test")


def test_kafka_python_describes_and_updates_features(broker):
    from kafka.errors import InvalidUpdateVersionError
    client = admin(broker.bootstrap)
    try:
        described = client.describe_features()
        assert described["metadata.version"]["supported"] == (7, 30)
        assert described["metadata.version"]["finalized"] == (30, 30)
        assert described["transaction.version"]["finalized"] == (2, 2)
        epoch = described["transaction.version"]["finalized_epoch"]
        with pytest.raises(InvalidUpdateVersionError):
            client.update_features({"transaction.version": 1})  # a downgrade not asked for
        client.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)})
        after = client.describe_features()
        assert after["transaction.version"]["finalized"] == (1, 1)
        assert after["transaction.version"]["finalized_epoch"] == epoch + 1
        client.update_features({"eligible.leader.replicas.version": ("SAFE_DOWNGRADE", 0)})
        # level 0: no longer finalized, still supported
        assert "finalized" not in client.describe_features()["eligible.leader.replicas.version"]
    finally:
        client.close()
    broker.stop()
    broker.start()
    client = admin(broker.bootstrap)
    try:
        again = client.describe_features()
        assert again["transaction.version"]["finalized"] == (1, 1)
        assert "finalized" not in again["eligible.leader.replicas.version"]
        assert again["transaction.version"]["finalized_epoch"] == epoch + 2
    finally:
        client.close()
