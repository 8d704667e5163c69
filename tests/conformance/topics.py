"""Topic creation for conformance scenarios: CreateTopics, then wait until Metadata shows every
partition with a leader (Kafka's broker learns of a new topic from its controller a moment
later; kbroker at once)."""
from __future__ import annotations

import time

from protocol.errors import ErrorCode as E
from protocol.messages import CreateTopicsRequest, MetadataRequest
from tests.support import RawClient


def create_topic(client: RawClient, name: str, partitions: int) -> str:
    created = client.call(CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                                   replication_factor=1, assignments=[],
                                                   configs=[])],
        timeout_ms=30000), 5)
    assert [t.error_code for t in created.topics] == [E.NONE], created
    deadline = time.monotonic() + 30
    while True:
        meta = client.call(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name)],
            allow_auto_topic_creation=False), 9)
        t = meta.topics[0]
        if (t.error_code == E.NONE and len(t.partitions) == partitions
                and all(p.leader_id >= 0 for p in t.partitions)):
            return name
        assert time.monotonic() < deadline, f"topic {name} never appeared: {meta}"
        time.sleep(0.1)
