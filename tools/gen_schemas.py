"""Regenerate protocol/schemas.json from Kafka's own JSON message definitions.

The definitions are facts of the protocol; Kafka ships them inside its jars on Maven Central
(kafka-clients for the wire APIs, kafka-group-coordinator for the __consumer_offsets records,
kafka-transaction-coordinator for the __transaction_state records, kafka-share-coordinator for
the __share_group_state records).
This script resolves those jars with Maven, strips comments and documentation, keeps only the
messages the broker speaks, and writes one compact JSON file that protocol/schema.py compiles.

    python tools/gen_schemas.py            # KAFKA_VERSION defaults to the one below

Reproducible: same Kafka version in, same file out (keys sorted, no timestamps).
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import zipfile

KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "4.3.1")
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "protocol" / "schemas.json"

# API name -> lowest version we decode. Kafka 4 dropped Produce v0-2 from its definitions but the
# field versions still describe them; we decode them so we can refuse them cleanly.
APIS = {
    "Produce": 0, "Fetch": None, "ListOffsets": None, "Metadata": None, "OffsetCommit": None,
    "OffsetFetch": None, "FindCoordinator": None, "JoinGroup": None, "Heartbeat": None,
    "LeaveGroup": None, "SyncGroup": None, "DescribeGroups": None, "ListGroups": None,
    "SaslHandshake": None, "ApiVersions": None, "CreateTopics": None, "DeleteTopics": None,
    "InitProducerId": None, "DescribeConfigs": None, "SaslAuthenticate": None,
    "CreatePartitions": None, "DeleteGroups": None, "OffsetDelete": None,
    "DescribeCluster": None, "ConsumerGroupHeartbeat": None, "ConsumerGroupDescribe": None,
    "DeleteRecords": None, "AlterConfigs": None, "IncrementalAlterConfigs": None,
    "DescribeLogDirs": None, "DescribeAcls": None, "CreateAcls": None, "DeleteAcls": None,
    "DescribeProducers": None, "AddPartitionsToTxn": None, "AddOffsetsToTxn": None,
    "EndTxn": None, "TxnOffsetCommit": None, "DescribeTransactions": None,
    "ListTransactions": None, "WriteTxnMarkers": None, "OffsetForLeaderEpoch": None,
    "DescribeTopicPartitions": None, "ElectLeaders": None, "AlterPartitionReassignments": None,
    "ListPartitionReassignments": None, "AlterReplicaLogDirs": None, "DescribeQuorum": None,
    "ListConfigResources": None, "AlterUserScramCredentials": None,
    "DescribeUserScramCredentials": None, "CreateDelegationToken": None,
    "RenewDelegationToken": None, "ExpireDelegationToken": None,
    "DescribeDelegationToken": None, "DescribeClientQuotas": None, "AlterClientQuotas": None,
    "UpdateFeatures": None, "UnregisterBroker": None, "AddRaftVoter": None,
    "RemoveRaftVoter": None, "ShareGroupHeartbeat": None, "ShareGroupDescribe": None,
    "ShareFetch": None, "ShareAcknowledge": None, "DescribeShareGroupOffsets": None,
    "AlterShareGroupOffsets": None, "DeleteShareGroupOffsets": None,
    "InitializeShareGroupState": None, "ReadShareGroupState": None,
    "WriteShareGroupState": None, "DeleteShareGroupState": None,
    "ReadShareGroupStateSummary": None,
    "StreamsGroupHeartbeat": None, "StreamsGroupDescribe": None,
}
CLIENT_DATA = ["RequestHeader", "ResponseHeader", "ConsumerProtocolSubscription",
               "ConsumerProtocolAssignment", "EndTxnMarker"]
COORDINATOR_RECORDS = ["OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey",
                       "GroupMetadataValue"] + [
    f"ConsumerGroup{name}{part}" for name in (
        "Metadata", "MemberMetadata", "TargetAssignmentMetadata", "TargetAssignmentMember",
        "CurrentMemberAssignment", "RegularExpression", "PartitionMetadata")
    for part in ("Key", "Value")] + [
    f"ShareGroup{name}{part}" for name in (
        "Metadata", "MemberMetadata", "TargetAssignmentMetadata", "TargetAssignmentMember",
        "CurrentMemberAssignment", "StatePartitionMetadata")
    for part in ("Key", "Value")] + [
    f"StreamsGroup{name}{part}" for name in (
        "Metadata", "Topology", "MemberMetadata", "TargetAssignmentMetadata",
        "TargetAssignmentMember", "CurrentMemberAssignment")
    for part in ("Key", "Value")]
TRANSACTION_RECORDS = ["TransactionLogKey", "TransactionLogValue"]
SHARE_STATE_RECORDS = ["ShareSnapshotKey", "ShareSnapshotValue", "ShareUpdateKey",
                       "ShareUpdateValue"]
KEEP_KEYS = {"name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default",
             "ignorable", "fields", "flexibleVersions", "mapKey"}


def resolve_jar(artifact: str) -> pathlib.Path:
    repo = pathlib.Path.home() / ".m2" / "repository" / "org" / "apache" / "kafka" / artifact
    jar = repo / KAFKA_VERSION / f"{artifact}-{KAFKA_VERSION}.jar"
    if not jar.exists():
        subprocess.run(["mvn", "-q", "dependency:get", "-Dtransitive=false",
                        f"-Dartifact=org.apache.kafka:{artifact}:{KAFKA_VERSION}"], check=True)
    return jar


def read_definition(jar: zipfile.ZipFile, name: str) -> dict:
    text = jar.read(f"common/message/{name}.json").decode()
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    return json.loads(text)


def clean_fields(fields: list[dict]) -> list[dict]:
    out = []
    for field in fields:
        kept = {k: v for k, v in field.items() if k in KEEP_KEYS}
        if "fields" in kept:
            kept["fields"] = clean_fields(kept["fields"])
        out.append(kept)
    return out


def clean(defn: dict, lowest: int | None = None) -> dict:
    out = {k: defn[k] for k in ("name", "type", "validVersions", "flexibleVersions", "apiKey")
           if k in defn}
    if lowest is not None:
        high = defn["validVersions"].split("-")[-1]
        out["validVersions"] = f"{lowest}-{high}"
    out["fields"] = clean_fields(defn["fields"])
    if "commonStructs" in defn:
        out["commonStructs"] = [
            {"name": s["name"], "versions": s.get("versions", "0+"),
             "fields": clean_fields(s["fields"])} for s in defn["commonStructs"]]
    return out


def main() -> int:
    messages: dict[str, dict] = {}
    with zipfile.ZipFile(resolve_jar("kafka-clients")) as jar:
        for api, lowest in APIS.items():
            for kind in ("Request", "Response"):
                messages[api + kind] = clean(read_definition(jar, api + kind), lowest)
        for name in CLIENT_DATA:
            messages[name] = clean(read_definition(jar, name))
    with zipfile.ZipFile(resolve_jar("kafka-group-coordinator")) as jar:
        for name in COORDINATOR_RECORDS:
            messages[name] = clean(read_definition(jar, name))
    with zipfile.ZipFile(resolve_jar("kafka-transaction-coordinator")) as jar:
        for name in TRANSACTION_RECORDS:
            messages[name] = clean(read_definition(jar, name))
    with zipfile.ZipFile(resolve_jar("kafka-share-coordinator")) as jar:
        for name in SHARE_STATE_RECORDS:
            messages[name] = clean(read_definition(jar, name))
    doc = {"kafkaVersion": KAFKA_VERSION, "messages": messages}
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(messages)} messages from Kafka {KAFKA_VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
