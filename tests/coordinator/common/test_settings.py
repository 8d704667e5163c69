"""A coordinator's settings class (broker/coordinator/common/settings.py): Kafka's defaults,
read from the broker's config by Kafka name or attribute name, converted to each default's
type."""
from __future__ import annotations

import pytest

from broker.config import SETTINGS, BrokerConfig
from broker.coordinator.group.coordinator import CoordinatorConfig
from broker.coordinator.transaction.coordinator import TransactionConfig


def test_defaults_are_kafkas():
    config = TransactionConfig()
    assert config.transaction_max_timeout_ms == SETTINGS["transaction.max.timeout.ms"].default
    assert config.transaction_partition_verification_enable is True
    assert CoordinatorConfig().group_max_size == SETTINGS["group.max.size"].default


def test_read_by_kafka_or_attribute_name_with_each_defaults_type():
    config = CoordinatorConfig.from_config({"group.max.size": "7",
                                            "group_consumer_assignors": "range, uniform",
                                            "group.consumer.migration.policy": "BIDIRECTIONAL"})
    assert config.group_max_size == 7
    assert config.group_consumer_assignors == ("range", "uniform")
    assert config.group_consumer_migration_policy == "bidirectional"
    assert config == CoordinatorConfig(group_max_size=7, group_consumer_assignors=(
        "range", "uniform"), group_consumer_migration_policy="bidirectional")
    assert config != CoordinatorConfig()
    assert TransactionConfig.from_config(BrokerConfig({
        "transaction.partition.verification.enable": "false"})
    ).transaction_partition_verification_enable is False
    assert CoordinatorConfig.from_config(config) is config


def test_a_setting_it_does_not_read_is_refused():
    with pytest.raises(TypeError, match="no setting group_nonsense"):
        CoordinatorConfig(group_nonsense=1)
    with pytest.raises(AttributeError):
        CoordinatorConfig().group_nonsense = 1
