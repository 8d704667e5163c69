"""Differential conformance of Produce with acks=0, against Kafka 4.3.1 and kbroker: no answer
at all when every partition takes its records (the connection serves the next request), and the
connection closed when a partition fails, so that the producer notices (Kafka's KafkaApis closes
it: "Closing connection due to error during produce request ... with ack=0")."""
from __future__ import annotations

import pytest

from protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages import ProduceRequest as P
from protocol.records import SimpleRecord, build_batch
from tests.support import unique

from .topics import create_topic


def produce(topic: str, partitions, acks: int = 0):
    return P(acks=acks, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(
            index=p, records=build_batch([SimpleRecord(None, b"v%d" % p)])) for p in partitions])])


def writable(client, topic: str, partitions) -> None:
    """Wait until each partition takes records (acks=1): Kafka's Metadata may name a leader a
    moment before that leader serves Produce, and an acks=0 error there would close the
    connection for a reason this scenario is not about."""
    import time
    deadline = time.monotonic() + 30
    while True:
        answer = client.call(produce(topic, partitions, acks=1), 9)
        errors = [p.error_code for t in answer.responses for p in t.partition_responses]
        if not any(errors):
            return
        assert time.monotonic() < deadline, errors
        time.sleep(0.2)


def test_acks_0_that_succeeds_gets_no_answer_and_the_connection_goes_on(target, connect):
    client = connect("acks-0")
    topic = create_topic(client, unique("acks0"), 2)
    writable(client, topic, [0, 1])
    client.send(produce(topic, [0, 1]), 9)
    # the next answer on the connection is the ApiVersions one: the produce had none
    sent = client.send(ApiVersionsRequest(), 0)
    correlation_id, answer = client.receive(ApiVersionsResponse, 0, 18)
    assert correlation_id == sent and answer.error_code == 0


@pytest.mark.parametrize("partitions", [[5], [0, 5]])
def test_acks_0_with_a_failed_partition_closes_the_connection(target, connect, partitions):
    client = connect("acks-0")
    topic = create_topic(client, unique("acks0-bad"), 1)
    client.send(produce(topic, partitions), 9)
    with pytest.raises(ConnectionError):
        client.receive(ApiVersionsResponse, 0, 18)
