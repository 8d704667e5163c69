"""Loading the coordinators at start (issue 14, defect 6): the replay of a partition gives the
event loop back every few milliseconds, so the broker answers other requests while a shard
still answers COORDINATOR_LOAD_IN_PROGRESS; and below the last stable offset only the last
record of each key is replayed, which gives the state a replay of every record gives."""
from __future__ import annotations

import asyncio
import struct

from broker.coordinator.common import storage as coordinator_log
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.coordinator.group import records as rec
from broker.coordinator.group.group import OffsetAndMetadata
from broker.coordinator.common.runtime import EndMarker
from broker.log import LogConfig, MemoryLog
from broker.topics import Partition
from protocol import messages as m
from protocol.framing import encode_request, read_response_header
from protocol.records import SimpleRecord, build_batch
from tests.coordinator.harness import Harness

NOW = 1_000_000


# --- which records a load replays ------------------------------------------------------------

def every_entry(log):
    """The replay before: every record of the log, in order."""
    for batch in log.batches():
        if batch.is_control:
            for record in batch.records():
                yield EndMarker(batch.producer_id, batch.producer_epoch,
                                int.from_bytes(record.key[2:4], "big") == 1)
            continue
        producer_id = batch.producer_id if batch.is_transactional else -1
        for record in batch.records():
            yield record.key, record.value, producer_id


def commit(p, group, topic, partition, offset, *, pid=None):
    key = rec.offset_commit_key(group, topic, partition)
    value = rec.offset_commit_value(OffsetAndMetadata(offset, -1, "", NOW))
    if pid is None:
        p.log.append(build_batch([SimpleRecord(key, value, timestamp=NOW)]))
    else:
        p.append_from_coordinator(build_batch(
            [SimpleRecord(key, value, timestamp=NOW)], producer_id=pid, producer_epoch=0,
            base_sequence=-1, is_transactional=True))


def tombstone(p, group, topic, partition):
    key = rec.offset_commit_key(group, topic, partition)
    p.log.append(build_batch([SimpleRecord(key, None, timestamp=NOW)]))


def state(shard):
    offsets = {(gid, tp): o.offset for gid, group in shard.groups.items()
               for tp, o in group.offsets.items()}
    pending = {pid: {g: {tp: o.offset for tp, o in by_tp.items()} for g, by_tp in by_group.items()}
               for pid, by_group in shard.offsets.pending_transactions.items()}
    return offsets, pending


def test_replaying_the_last_record_of_each_key_gives_the_full_replays_state():
    p = Partition(None, 0, MemoryLog(LogConfig(cleanup_policy="compact")))
    for round_ in range(5):
        for group in ("g1", "g2"):
            for partition in range(3):
                commit(p, group, "t", partition, round_ * 10 + partition)
    commit(p, "g1", "t", 0, 100, pid=7)  # committed below: wins over round 4
    commit(p, "g1", "t", 1, 101, pid=8)  # aborted below: must not hide round 4's 41
    commit(p, "g2", "t", 0, 200, pid=9)  # committed, then superseded by a plain commit
    commit(p, "g2", "t", 0, 300)
    assert p.write_end_marker(7, 1, True, 0, NOW) == 0  # (markers carry the bumped epoch)
    assert p.write_end_marker(8, 1, False, 0, NOW) == 0
    assert p.write_end_marker(9, 1, True, 0, NOW) == 0
    tombstone(p, "g2", "t", 2)
    commit(p, "g1", "t", 2, 500, pid=10)  # open: above the last stable offset
    commit(p, "g1", "t", 2, 600)  # above the LSO too: replayed as it is
    assert p.log.last_stable_offset < p.log.log_end_offset

    full, deduped = Harness().coordinator.shards[0], Harness().coordinator.shards[0]
    replayed_all = full.load(every_entry(p.log))
    replayed = deduped.load(coordinator_log.read_entries(p.log))
    assert state(deduped) == state(full)
    offsets, pending = state(full)
    assert offsets[("g1", ("t", 0))] == 100 and offsets[("g1", ("t", 1))] == 41
    assert offsets[("g2", ("t", 0))] == 300 and ("g2", ("t", 2)) not in offsets
    assert offsets[("g1", ("t", 2))] == 600 and pending == {10: {"g1": {("t", 2): 500}}}
    # markers count as entries; the records below the LSO: one per key, and no aborted one
    markers = 3
    assert replayed - markers == 6 + 2 and replayed_all - markers == 30 + 4 + 1 + 2


# --- other requests answered while a shard loads ----------------------------------------------

class Client:
    def __init__(self, reader, writer) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    async def call(self, request, version: int):
        self.correlation_id += 1
        self.writer.write(encode_request(type(request).api_key, version, self.correlation_id,
                                         "loading-test", request))
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        frame = await self.reader.readexactly(size)
        api = m.APIS[type(request).api_key]
        _, offset = read_response_header(frame, api.response_header_version(version))
        return api.response.decode(frame, version, offset)


def broker_config(data_dir) -> BrokerConfig:
    # one shard for every group: before, its whole replay ran in one turn of the event loop
    return BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.port": 0,
                         "log.dirs": str(data_dir), "offsets.topic.num.partitions": 1,
                         "transaction.state.log.num.partitions": 1})


async def connect(broker: Broker) -> Client:
    host, port = broker.server.bound["PLAINTEXT"]
    return Client(*await asyncio.open_connection(host, port))


def offset_commit(group: str, round_: int):
    C = m.OffsetCommitRequest
    return C(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        C.OffsetCommitRequestTopic(name="t", partitions=[
            C.OffsetCommitRequestPartition(partition_index=p, committed_offset=round_ * 100 + p,
                                           committed_metadata="") for p in range(4)])])


def offset_fetch(group: str):
    F = m.OffsetFetchRequest
    return F(group_id=group, topics=[F.OffsetFetchRequestTopic(
        name="t", partition_indexes=list(range(4)))])


def test_other_requests_are_answered_while_a_shard_loads(tmp_path, monkeypatch):
    async def fill():
        broker = Broker(broker_config(tmp_path))
        await broker.start()
        try:
            broker.topics.create("t", 4)
            client = await connect(broker)
            for round_ in range(60):
                for g in range(20):
                    response = await client.call(offset_commit(f"group-{g}", round_), 8)
                    assert {p.error_code for t in response.topics for p in t.partitions} == {0}
            client.writer.close()
        finally:
            await broker.stop()

    asyncio.run(fill())
    monkeypatch.setattr(coordinator_log, "LOAD_SLICE_S", 0.0)  # a slice per 32 entries

    async def restart():
        broker = Broker(broker_config(tmp_path))
        listening = asyncio.Event()
        start_listeners = broker.server.start

        async def started():
            await start_listeners()
            listening.set()

        broker.server.start = started
        connected = asyncio.Event()
        load_all = coordinator_log.load_all

        async def load_when_connected(*args, **kwargs):
            await connected.wait()  # the shards answer LOAD_IN_PROGRESS meanwhile
            return await load_all(*args, **kwargs)

        monkeypatch.setattr(coordinator_log, "load_all", load_when_connected)
        seen = []

        async def client_while_loading():
            await listening.wait()
            client = await connect(broker)
            connected.set()
            while broker.coordinator.shards_loading:
                versions = await client.call(m.ApiVersionsRequest(
                    client_software_name="test", client_software_version="1"), 3)
                metadata = await client.call(m.MetadataRequest(topics=None), 12)
                fetched = await client.call(offset_fetch("group-3"), 5)
                seen.append((bool(broker.coordinator.shards_loading), versions.error_code,
                             len(metadata.brokers), fetched.error_code))
            after = await client.call(offset_fetch("group-3"), 5)
            client.writer.close()
            return after

        client = asyncio.get_running_loop().create_task(client_while_loading())
        await broker.start()
        after = await client
        await broker.stop()
        return seen, after

    seen, after = asyncio.run(restart())
    during = [s for s in seen if s[0]]
    assert len(during) >= 3, seen
    assert all(s[1:] == (0, 1, 14) for s in during)  # COORDINATOR_LOAD_IN_PROGRESS
    assert after.error_code == 0
    assert [p.committed_offset for t in after.topics for p in t.partitions] == [
        5900, 5901, 5902, 5903]
