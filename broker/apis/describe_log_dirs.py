"""DescribeLogDirs: the broker's one log directory and the size of each partition in it (what
topic UIs show as a topic's size). In memory there is no directory: it is reported as
"in-memory" with unknown total and usable bytes (-1), as Kafka reports an unknown size."""
from __future__ import annotations

import shutil

from protocol.errors import ErrorCode
from protocol.messages import DescribeLogDirsResponse

from ..security.authorizer import AclOperation
from ..partitions.replicas import IN_MEMORY

NAME = "DescribeLogDirs"

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionResult = DescribeLogDirsResponse.DescribeLogDirsPartition



def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.DESCRIBE):
        respond(DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                        results=[]))
        return
    if request.topics is None:
        wanted = [(topic, None) for topic in broker.topics.topics.values()]
    else:
        wanted = [(broker.topics.get(t.topic), set(t.partitions)) for t in request.topics]
    topics = []
    for topic, indexes in wanted:
        if topic is None:
            continue  # Kafka leaves out what it does not host
        partitions = [PartitionResult(partition_index=p.index, partition_size=p.log.size_bytes,
                                      offset_lag=0, is_future_key=False)
                      for p in topic.partitions if indexes is None or p.index in indexes]
        if partitions:
            topics.append(TopicResult(name=topic.name, partitions=partitions))
    data_dir = broker.topics.data_dir
    total = usable = -1
    if data_dir:
        usage = shutil.disk_usage(data_dir)
        total, usable = usage.total, usage.free
    respond(DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=[Result(
        error_code=ErrorCode.NONE, log_dir=data_dir or IN_MEMORY, topics=topics,
        total_bytes=total, usable_bytes=usable, is_cordoned=False)]))
