"""A consumer-group member run as its own process by the group tests.

    python -m tests.clients.group_consumer --client kafka-python --bootstrap HOST:PORT \
        --topic T --group G --assignor range [--instance-id ID] [--session-timeout-ms N]

``--assignor consumer`` (or ``consumer:uniform``, ``consumer:range``) runs a confluent-kafka
member with group.protocol=consumer (KIP-848).

Prints one JSON line per event on stdout: {"event": "assigned", "partitions": [...]},
{"event": "record", "p": .., "o": .., "v": ..}, {"event": "committed"}, {"event": "closed"}.
Commits synchronously after every poll that returned records. SIGTERM closes the consumer
(which sends LeaveGroup) and exits 0.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

stopping = False


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def on_sigterm(signum, frame) -> None:
    global stopping
    stopping = True


def run_kafka_python(args) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    from tests.support import subscribe_with_metadata
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor}

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit(event="revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):
            emit(event="assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
        enable_auto_commit=False, auto_offset_reset="earliest",
        partition_assignment_strategy=[assignors[args.assignor]],
        session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=1000,
        group_instance_id=args.instance_id)
    subscribe_with_metadata(consumer, [args.topic], listener=Listener())
    while not stopping:
        batches = consumer.poll(timeout_ms=200)
        for records in batches.values():
            for r in records:
                emit(event="record", p=r.partition, o=r.offset, v=r.value.decode())
        if batches:
            try:
                consumer.commit()
            except (CommitFailedError, RebalanceInProgressError) as e:
                emit(event="commit-failed", error=repr(e))  # a rebalance overtook it
                continue
            emit(event="committed")
    consumer.close()


def run_confluent(args) -> None:
    from confluent_kafka import Consumer, KafkaException
    strategies = {"range": "range", "roundrobin": "roundrobin",
                  "cooperative-sticky": "cooperative-sticky"}
    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group,
              "client.id": args.client_id, "enable.auto.commit": False,
              "auto.offset.reset": "earliest"}
    if args.assignor.startswith("consumer"):
        # KIP-848: the broker assigns ("consumer:range" names its assignor) and sets the
        # heartbeat interval and session timeout
        config["group.protocol"] = "consumer"
        if ":" in args.assignor:
            config["group.remote.assignor"] = args.assignor.split(":", 1)[1]
    else:
        config.update({"partition.assignment.strategy": strategies[args.assignor],
                       "session.timeout.ms": args.session_timeout_ms,
                       "heartbeat.interval.ms": 1000})
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    current: set[int] = set()

    def on_assign(c, partitions):
        current.update(tp.partition for tp in partitions)
        emit(event="assigned", partitions=sorted(current))

    def on_revoke(c, partitions):
        current.difference_update(tp.partition for tp in partitions)
        emit(event="revoked", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stopping:
        msgs = consumer.consume(num_messages=100, timeout=0.2)
        got = False
        for msg in msgs:
            if msg.error():
                continue
            got = True
            emit(event="record", p=msg.partition(), o=msg.offset(), v=msg.value().decode())
        if got:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as e:  # e.g. REBALANCE_IN_PROGRESS: a rebalance overtook it
                emit(event="commit-failed", error=str(e))
                continue
            emit(event="committed")
    consumer.close()


def run_aiokafka(args) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import CommitFailedError, RebalanceInProgressError
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor}

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            emit(event="revoked", partitions=sorted(tp.partition for tp in revoked))

        async def on_partitions_assigned(self, assigned):
            emit(event="assigned", partitions=sorted(tp.partition for tp in assigned))

    async def main():
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
            enable_auto_commit=False, auto_offset_reset="earliest",
            partition_assignment_strategy=(assignors[args.assignor],),
            session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=1000,
            group_instance_id=args.instance_id)
        await consumer.start()
        consumer.subscribe([args.topic], listener=Listener())
        while not stopping:
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for r in records:
                    emit(event="record", p=r.partition, o=r.offset, v=r.value.decode())
            if batches:
                try:
                    await consumer.commit()
                except (CommitFailedError, RebalanceInProgressError) as e:
                    emit(event="commit-failed", error=repr(e))  # a rebalance overtook it
                    continue
                emit(event="committed")
        await consumer.stop()

    asyncio.run(main())


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--client", required=True, choices=["kafka-python", "aiokafka", "confluent"])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--assignor", default="range")
    p.add_argument("--client-id", default="group-test")
    p.add_argument("--instance-id")
    p.add_argument("--session-timeout-ms", type=int, default=10000)
    args = p.parse_args()
    signal.signal(signal.SIGTERM, on_sigterm)
    {"kafka-python": run_kafka_python, "confluent": run_confluent,
     "aiokafka": run_aiokafka}[args.client](args)
    emit(event="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
