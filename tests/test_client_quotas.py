"""Client quotas without a network (broker/client_quotas.py): Kafka's sampled rate and throttle
time on an injected clock, the precedence of quota entities, and the store's file."""
from __future__ import annotations

import json

import pytest

from broker.client_quotas import (ClientQuotas, ClientQuotaStore, QuotaManager, SampledRate,
                                  entity_key)


def put(store: ClientQuotaStore, key: str, value: float, **entity) -> None:
    names = {k.replace("_", "-"): v for k, v in entity.items()}
    store.apply(entity_key(names), {key: value})
    store.changed()


def test_rate_divides_by_at_least_the_full_windows_but_one():
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(40000, 0)
    # nothing elapsed yet: the rate is over (11 - 1) windows of 1 s
    assert rate.window_size(0) == 10000
    assert rate.rate(0) == 4000.0
    rate.record(40000, 10)
    assert rate.window_size(10) == 10010
    assert rate.rate(10) == pytest.approx(80000 / 10.010)


def test_rate_counts_the_retained_samples_and_forgets_the_old_ones():
    rate = SampledRate(samples=3, window_ms=1000)
    for t in (0, 1000, 2000):  # three samples, 100 each
        rate.record(100, t)
    assert rate.window_size(2500) == 2500
    assert rate.rate(2500) == pytest.approx(300 / 2.5)
    rate.record(100, 3000)  # recycles the oldest sample (t=0)
    assert rate.rate(3500) == pytest.approx(300 / 2.5)  # samples of 1000, 2000 and 3000
    # every sample older than samples x window is reset: nothing is left
    assert rate.rate(10000) == 0.0


def test_throttle_time_is_kafkas_overshoot_over_the_window():
    store = ClientQuotaStore(None)
    quota = QuotaManager("Produce", "producer_byte_rate", store, samples=11, window_s=1)
    put(store, "producer_byte_rate", 10000.0, client_id="c")
    assert quota.record("ANONYMOUS", "c", 40000, 0) == 0
    assert quota.record("ANONYMOUS", "c", 40000, 10) == 0
    # 120000 bytes over 10.02 s: 11976 B/s, 19.8% over the bound, for a 10.02 s window
    owed = quota.record("ANONYMOUS", "c", 40000, 20)
    expected = (120000 / 10.020 - 10000) / 10000 * 10020
    assert owed == round(expected) == 1980
    # another client id has no quota and owes nothing
    assert quota.record("ANONYMOUS", "other", 10 ** 9, 20) == 0
    assert ("", "other") not in quota.sensors


def test_without_any_quota_nothing_is_measured():
    store = ClientQuotaStore(None)
    quota = QuotaManager("Produce", "producer_byte_rate", store, samples=11, window_s=1)
    put(store, "consumer_byte_rate", 1.0, client_id="c")  # another type's quota
    assert not quota.enabled
    assert quota.record("u", "c", 10 ** 9, 0) == 0
    assert quota.sensors == {}
    assert quota.max_value_in_window("u", "c") is None


def test_unrecord_takes_back_what_was_counted():
    store = ClientQuotaStore(None)
    quota = QuotaManager("Fetch", "consumer_byte_rate", store, samples=11, window_s=1)
    put(store, "consumer_byte_rate", 1000.0, user="u")
    assert quota.record("u", "c", 20000, 0) == 10000
    quota.unrecord("u", "c", 20000, 0)
    assert quota.record("u", "c", 1000, 0) == 0
    # a fetch may take at most bound x (samples - 1) x window in one answer
    assert quota.max_value_in_window("u", "c") == 1000 * 10


@pytest.mark.parametrize("entities, expected_tags, expected_bound", [
    # Kafka's order: user+client-id, user+default client-id, user, default user+client-id,
    # default user+default client-id, default user, client-id, default client-id
    ([({"user": "u", "client-id": "c"}, 1), ({"user": "u"}, 2), ({"client-id": "c"}, 3)],
     ("u", "c"), 1),
    ([({"user": "u", "client-id": None}, 4), ({"user": "u"}, 2)], ("u", "c"), 4),
    ([({"user": "u"}, 2), ({"user": None, "client-id": "c"}, 5)], ("u", ""), 2),
    ([({"user": None, "client-id": "c"}, 5), ({"user": None}, 6)], ("u", "c"), 5),
    ([({"user": None, "client-id": None}, 7), ({"user": None}, 6)], ("u", "c"), 7),
    ([({"user": None}, 6), ({"client-id": "c"}, 3)], ("u", ""), 6),
    ([({"client-id": "c"}, 3), ({"client-id": None}, 8)], ("", "c"), 3),
    ([({"client-id": None}, 8)], ("", "c"), 8),
    ([({"user": "someone-else"}, 9)], ("", "c"), None),
])
def test_the_quota_that_applies_follows_kafkas_precedence(entities, expected_tags,
                                                          expected_bound):
    store = ClientQuotaStore(None)
    quota = QuotaManager("Produce", "producer_byte_rate", store, samples=11, window_s=1)
    for entity, value in entities:
        store.apply(entity_key(entity), {"producer_byte_rate": float(value)})
    store.changed()
    tags = quota.metric_tags("u", "c")
    assert tags == expected_tags
    assert quota.bound(tags) == (None if expected_bound is None else float(expected_bound))


def test_clients_under_one_user_quota_share_one_rate():
    store = ClientQuotaStore(None)
    quota = QuotaManager("Produce", "producer_byte_rate", store, samples=11, window_s=1)
    put(store, "producer_byte_rate", 1000.0, user="u")
    assert quota.record("u", "a", 6000, 0) == 0
    assert quota.record("u", "b", 6000, 0) == 2000  # 12000 over 10 s: 20% over
    assert list(quota.sensors) == [("u", "")]


def test_quotas_persist_in_the_data_dir(tmp_path):
    quotas = ClientQuotas(str(tmp_path))
    store = quotas.store
    store.apply(entity_key({"user": "u", "client-id": None}), {"producer_byte_rate": 5.0,
                                                              "request_percentage": 12.5})
    store.apply(entity_key({"ip": "10.0.0.1"}), {"connection_creation_rate": 3.0})
    store.changed()
    saved = json.loads((tmp_path / "client-quotas.json").read_text())
    assert len(saved) == 2
    again = ClientQuotas(str(tmp_path))
    assert again.store.entities == store.entities
    assert again.produce.enabled and again.request.enabled and not again.fetch.enabled
    # removing the last key removes the entity, on disk too
    store.apply(entity_key({"ip": "10.0.0.1"}), {"connection_creation_rate": None})
    store.changed()
    assert entity_key({"ip": "10.0.0.1"}) not in ClientQuotas(str(tmp_path)).store.entities


def test_sensors_are_bounded(monkeypatch):
    import broker.client_quotas as cq
    monkeypatch.setattr(cq, "MAX_SENSORS", 3)
    store = ClientQuotaStore(None)
    quota = QuotaManager("Produce", "producer_byte_rate", store, samples=11, window_s=1)
    put(store, "producer_byte_rate", 1000.0, client_id=None)
    for i in range(10):
        quota.record("ANONYMOUS", f"client-{i}", 1, i)
    assert len(quota.sensors) == 3
    assert ("", "client-9") in quota.sensors and ("", "client-0") not in quota.sensors


def test_quota_rates_are_scraped_with_kafkas_names():
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry, generate_latest

    from broker.metrics_export import BrokerStateCollector
    now = [0]
    quotas = ClientQuotas(None)
    broker = SimpleNamespace(client_quotas=quotas, clock=lambda: now[0])
    put(quotas.store, "producer_byte_rate", 1000.0, client_id="c")
    quotas.produce.record("ANONYMOUS", "c", 12000, 0)
    registry = CollectorRegistry()
    registry.register(BrokerStateCollector(broker))
    text = generate_latest(registry).decode()
    assert 'kafka_server_produce_byte_rate{client_id="c",user=""} 1200.0' in text
    assert 'kafka_server_throttle_time_ms_total{client_id="c",type="Produce",user=""} 2000.0' \
        in text
    # nothing for the quota types without a quota
    assert "kafka_server_fetch_byte_rate{" not in text


def test_request_percentage_counts_handler_time():
    from types import SimpleNamespace

    from broker.security import ANONYMOUS
    quotas = ClientQuotas(None)
    put(quotas.store, "request_percentage", 1.0, user="ANONYMOUS")
    conn = SimpleNamespace(principal=ANONYMOUS, clock=lambda: 0)

    def request(seconds: float):
        return SimpleNamespace(conn=conn, client_id="c", handled=seconds, started=0.0,
                               throttle_ms=0)

    first = request(0.05)  # 5% of a thread for a second, over a 10 s window: 0.5%
    quotas.record_request(first)
    assert first.throttle_ms == 0
    second = request(0.1)  # 15 over 10 s: 1.5%, half again the quota: 5 s, bounded by 1 s
    quotas.record_request(second)
    assert second.throttle_ms == 1000
    # a larger throttle the request owes already stays
    third = request(0.0)
    third.throttle_ms = 9000
    quotas.record_request(third)
    assert third.throttle_ms == 9000


def test_controller_mutations_take_tokens_of_a_bucket_that_starts_full():
    from broker.client_quotas import MutationQuotaManager
    store = ClientQuotaStore(None)
    manager = MutationQuotaManager("ControllerMutation", "controller_mutation_rate", store,
                                   samples=11, window_s=1)
    put(store, "controller_mutation_rate", 2.0, client_id="c")
    now = 1_000_000
    assert manager.quota_for("u", "other", True, now) is None
    # the bucket holds 11 windows x 1 s x 2/s = 22 tokens
    strict = manager.quota_for("u", "c", True, now)
    assert strict.record(20) and strict.throttle_ms == 0
    assert strict.record(10) and strict.throttle_ms == 0  # takes it below zero: still passes
    assert not strict.record(1)  # already below zero: refused, throttled -tokens / quota
    assert strict.throttle_ms == 4000
    # 1.5 s later 3 tokens came back: still 5 short
    later = manager.quota_for("u", "c", True, now + 1500)
    assert not later.record(1) and later.throttle_ms == 2500
    # permissive (older versions): passes, and is throttled by what it overdraws (-4 - 3)
    permissive = manager.quota_for("u", "c", False, now + 2000)
    assert permissive.record(3) and permissive.throttle_ms == 3500
    # the bucket never holds more than its burst
    full = manager.quota_for("u", "c", True, now + 10 ** 7)
    assert full.record(0) and full.sensor.rate.tokens == 22.0


def test_connection_creation_rate_per_address_with_the_default():
    quotas = ClientQuotas(None)
    rates = quotas.connections
    assert not rates.enabled and rates.record("10.0.0.1", 0) == 0
    quotas.store.apply(entity_key({"ip": "10.0.0.1"}), {"connection_creation_rate": 2.0})
    quotas.store.apply(entity_key({"ip": None}), {"connection_creation_rate": 1.0})
    quotas.store.apply(entity_key({"ip": "localhost"}), {"connection_creation_rate": 1.0})
    quotas.store.changed()
    assert rates.bounds == {"10.0.0.1": 2.0, None: 1.0}  # host names count for nobody
    # (samples - 1) windows' worth at once: 20 at 2/s, then throttled, at most one window
    assert [rates.record("10.0.0.1", 1000) for _ in range(20)] == [0] * 20
    assert rates.record("10.0.0.1", 1000) == 500  # 21 over 10 s: 5% over
    # a throttled connection is not counted: the next one owes the same
    assert rates.record("10.0.0.1", 1000) == 500
    # another address falls under the default entity's 1/s: 10 at once
    assert [rates.record("10.0.0.2", 1000) for _ in range(10)] == [0] * 10
    assert rates.record("10.0.0.2", 1000) == 1000
    assert rates.record("10.0.0.2", 1000) == 1000  # (11/10 - 1) x 10 s, bounded by 1 s


def test_controller_mutation_throttle_is_scraped():
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry, generate_latest

    from broker.metrics_export import BrokerStateCollector
    quotas = ClientQuotas(None)
    put(quotas.store, "controller_mutation_rate", 1.0, client_id="c")
    quota = quotas.mutation.quota_for("ANONYMOUS", "c", False, 10 ** 9)
    assert quota.record(13) and quota.throttle_ms == 2000  # 11 tokens, 2 over at 1/s
    registry = CollectorRegistry()
    registry.register(BrokerStateCollector(SimpleNamespace(client_quotas=quotas,
                                                           clock=lambda: 10 ** 9)))
    text = generate_latest(registry).decode()
    assert ('kafka_server_throttle_time_ms_total{client_id="c",type="ControllerMutation",'
            'user=""} 2000.0') in text
