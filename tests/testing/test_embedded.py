"""EmbeddedBroker: the real broker in a thread of the test process, ready fast, and gone
without a trace once stopped."""
from __future__ import annotations

import gc
import os
import socket
import threading
import time
import tracemalloc
import weakref

import pytest

from protocol import messages as m

from broker.config import ConfigError
from broker.testing import EmbeddedBroker
from tests.support import RawClient


def test_serves_kafka_clients_with_settings_by_kafka_name():
    from kafka import KafkaConsumer, KafkaProducer
    with EmbeddedBroker(**{"num.partitions": 6}, log_retention_ms=123456) as kb:
        assert kb.bootstrap_servers == f"127.0.0.1:{kb.port}"
        assert kb.call(lambda: kb.broker.config["log.retention.ms"]) == 123456
        producer = KafkaProducer(bootstrap_servers=kb.bootstrap_servers)
        producer.send("auto-created", b"hello").get(timeout=10)
        producer.close()
        consumer = KafkaConsumer("auto-created", bootstrap_servers=kb.bootstrap_servers,
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)
        assert [r.value for r in consumer] == [b"hello"]
        assert len(consumer.partitions_for_topic("auto-created")) == 6
        consumer.close()


def test_runs_on_uvloop_in_its_own_thread():
    import uvloop
    with EmbeddedBroker() as kb:
        assert isinstance(kb.loop, uvloop.Loop)
        assert kb.thread is not threading.current_thread() and kb.thread.is_alive()
        assert kb.call(threading.current_thread) is kb.thread


def test_start_to_ready_well_under_a_second():
    EmbeddedBroker().start().stop()  # the first start imports the broker's modules
    took = []
    for _ in range(5):
        kb = EmbeddedBroker()
        started = time.monotonic()
        kb.start()
        client = RawClient(kb.port)
        assert client.call(m.ApiVersionsRequest(), 0).error_code == 0
        took.append(time.monotonic() - started)
        client.close()
        kb.stop()
    assert sorted(took)[2] < 0.5, took


def test_a_bad_setting_fails_in_the_callers_thread():
    with pytest.raises(ConfigError, match="num.partitions"):
        EmbeddedBroker(**{"num.partitions": 0})
    with pytest.raises(ConfigError, match="unknown setting"):
        EmbeddedBroker(**{"no.such.setting": 1})


def test_a_failed_start_raises_and_leaves_no_thread():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        before = threading.active_count()
        kb = EmbeddedBroker(listeners=f"PLAINTEXT://127.0.0.1:{port}")
        with pytest.raises(OSError, match="address already in use"):
            kb.start()
        assert threading.active_count() == before and not kb.running


def test_stop_closes_the_ports_and_the_connections():
    kb = EmbeddedBroker().start()
    port, metrics = kb.port, kb.call(lambda: kb.broker.http.bound[1])
    client = RawClient(port)
    assert client.call(m.ApiVersionsRequest(), 0).error_code == 0
    kb.stop()
    with pytest.raises(ConnectionError):
        client.call(m.ApiVersionsRequest(), 0)
    client.close()
    for p in (port, metrics):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", p), timeout=2).close()
    with pytest.raises(RuntimeError, match="not running"):
        kb.bootstrap_servers  # noqa: B018


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_start_stop_leaks_no_thread_fd_or_memory():
    def cycle():
        kb = EmbeddedBroker().start()
        client = RawClient(kb.port)
        client.call(m.ApiVersionsRequest(), 0)
        kb.create_topic(partitions=4)
        ref = weakref.ref(kb.call(lambda: kb.broker))
        client.close()
        kb.stop()
        return ref

    for _ in range(3):
        cycle()  # imports, codec caches, first-use allocations
    gc.collect()
    threads, fds = threading.active_count(), _fds()
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        refs = [cycle() for _ in range(20)]
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert [r for r in refs if r() is not None] == []  # every Broker was freed
    assert threading.active_count() == threads
    assert _fds() == fds
    # one broker holds about 0.5 MB of Python objects (100 coordinator shards and their
    # partitions); 20 cycles measured 5 KB of growth, and one broker kept would be over this
    assert grown < 256 * 1024, grown
