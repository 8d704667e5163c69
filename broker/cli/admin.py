"""``kbroker acl``, ``kbroker user`` (SCRAM), ``kbroker txn`` and ``kbroker cluster info`` on
kafka-python's KafkaAdminClient (DescribeAcls, CreateAcls, DeleteAcls,
DescribeUserScramCredentials, AlterUserScramCredentials, ListTransactions,
DescribeTransactions, DescribeProducers, WriteTxnMarkers, DescribeCluster, ApiVersions)."""
from __future__ import annotations

import os

from .connection import admin, connection_from
from .errors import CliError
from .output import emit_json, pairs, section, table


# -- acl ------------------------------------------------------------------------------------

def _acl_filter(args, create: bool):
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType,
                             ACLResourcePatternType, ResourcePattern, ResourcePatternFilter,
                             ResourceType)
    chosen = [(ResourceType.TOPIC, args.topic), (ResourceType.GROUP, args.group),
              (ResourceType.TRANSACTIONAL_ID, args.transactional_id),
              (ResourceType.CLUSTER, "kafka-cluster" if args.cluster else None)]
    chosen = [(t, n) for t, n in chosen if n is not None]
    if len(chosen) > 1:
        raise CliError("name one resource: --topic, --group, --transactional-id or --cluster",
                       status=2)
    try:
        operation = ACLOperation[args.operation.upper().replace("-", "_")] \
            if args.operation else ACLOperation.ANY
    except KeyError:
        raise CliError(f"unknown --operation {args.operation!r}: "
                       f"{', '.join(o.name for o in ACLOperation if o.value > 1)}",
                       status=2) from None
    permission = ACLPermissionType[args.permission.upper()] if args.permission \
        else ACLPermissionType.ANY
    pattern = ACLResourcePatternType[args.pattern.upper()] if args.pattern else None
    if create:
        if not chosen or not args.principal or not args.operation:
            raise CliError("acl create needs --principal, --operation and a resource "
                           "(--topic, --group, --transactional-id or --cluster)", status=2)
        resource_type, name = chosen[0]
        return ACL(principal=args.principal, host=args.host or "*", operation=operation,
                   permission_type=ACLPermissionType[(args.permission or "allow").upper()],
                   resource_pattern=ResourcePattern(
                       resource_type, name, pattern or ACLResourcePatternType.LITERAL))
    resource_type, name = chosen[0] if chosen else (ResourceType.ANY, None)
    return ACLFilter(principal=args.principal, host=args.host, operation=operation,
                     permission_type=permission,
                     resource_pattern=ResourcePatternFilter(
                         resource_type, name, pattern or ACLResourcePatternType.ANY))


def _acl_row(acl) -> dict:
    p = acl.resource_pattern
    return {"principal": acl.principal, "host": acl.host, "operation": acl.operation.name,
            "permission": acl.permission_type.name, "resource_type": p.resource_type.name,
            "resource_name": p.resource_name, "pattern_type": p.pattern_type.name}


def _acl_rows(rows: list[dict], args) -> None:
    if args.format == "json":
        for row in rows:
            emit_json(row)
        return
    table(["PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE-TYPE", "RESOURCE-NAME",
           "PATTERN-TYPE"],
          [[r["principal"], r["host"], r["operation"], r["permission"], r["resource_type"],
            r["resource_name"], r["pattern_type"]] for r in rows])


def acl_list(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        acls, _ = client.describe_acls(_acl_filter(args, create=False))
    _acl_rows(sorted((_acl_row(a) for a in acls), key=lambda r: tuple(map(str, r.values()))),
              args)
    return 0


def acl_create(args) -> int:
    acl = _acl_filter(args, create=True)
    conn = connection_from(args)
    with admin(conn) as client:
        result = client.create_acls([acl])
    if result["failed"]:
        raise CliError(f"could not create the ACL: {_error_text(result['failed'][0])}")
    _acl_rows([_acl_row(acl)], args)
    return 0


def acl_delete(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        results = client.delete_acls([_acl_filter(args, create=False)])
    _, matched, error = results[0]
    if error.errno:
        raise CliError(f"could not delete ACLs: {error.message}")
    _acl_rows([_acl_row(a) for a in matched], args)
    return 0


def _error_text(error) -> str:
    return getattr(error, "message", None) or str(error)


# -- user -----------------------------------------------------------------------------------

def user_list(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        users = client.describe_user_scram_credentials()
    rows = [{"user": user, "mechanisms": [{"mechanism": c["mechanism"].name.replace("_", "-"),
                                           "iterations": c["iterations"]}
                                          for c in info["credential_infos"]]}
            for user, info in sorted(users.items())]
    if args.format == "json":
        for row in rows:
            emit_json(row)
    else:
        table(["USER", "MECHANISMS"],
              [[r["user"], ", ".join(f"{m['mechanism']} ({m['iterations']} iterations)"
                                     for m in r["mechanisms"])] for r in rows])
    return 0


def _alter_user(args, alteration) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        result = client.alter_user_scram_credentials([alteration])
    error = result.get(args.user)
    if error:
        raise CliError(f"user {args.user!r}: {error}")
    if args.format == "json":
        emit_json({"user": args.user, "mechanism": args.mechanism, "error": None})
    else:
        table(["USER", "MECHANISM", "STATUS"], [[args.user, args.mechanism, "OK"]])
    return 0


def user_create(args) -> int:
    from kafka.admin import UserScramCredentialUpsertion
    password = args.password or os.environ.get("KBROKER_USER_PASSWORD")
    if not password:
        raise CliError("give --password or set KBROKER_USER_PASSWORD", status=2)
    return _alter_user(args, UserScramCredentialUpsertion(args.user, args.mechanism, password,
                                                          iterations=args.iterations))


def user_delete(args) -> int:
    from kafka.admin import UserScramCredentialDeletion
    return _alter_user(args, UserScramCredentialDeletion(args.user, args.mechanism))


# -- txn ------------------------------------------------------------------------------------

def _state(state) -> str:
    return getattr(state, "value", str(state))


def txn_list(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        by_broker = client.list_transactions()
    rows = sorted(({"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                    "state": _state(t.state)} for listings in by_broker.values()
                   for t in listings),
                  key=lambda r: r["transactional_id"])
    if args.format == "json":
        for row in rows:
            emit_json(row)
    else:
        table(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"],
              [[r["transactional_id"], r["producer_id"], r["state"]] for r in rows])
    return 0


def txn_describe(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        found = client.describe_transactions(args.transactional_ids)
    for i, tid in enumerate(args.transactional_ids):
        d = found.get(tid)
        if d is None:
            raise CliError(f"transactional id {tid!r} does not exist "
                           "(TRANSACTIONAL_ID_NOT_FOUND)")
        out = {"transactional_id": tid, "coordinator": d.coordinator_id,
               "state": _state(d.state), "producer_id": d.producer_id,
               "producer_epoch": d.producer_epoch,
               "transaction_timeout_ms": d.transaction_timeout_ms,
               "transaction_start_time_ms": d.transaction_start_time_ms,
               "partitions": [{"topic": tp.topic, "partition": tp.partition}
                              for tp in sorted(d.topic_partitions)]}
        if args.format == "json":
            emit_json(out)
            continue
        if i:
            print()
        pairs([("TRANSACTIONAL-ID", tid), ("STATE", out["state"]),
               ("PRODUCER-ID", out["producer_id"]), ("PRODUCER-EPOCH", out["producer_epoch"]),
               ("COORDINATOR", out["coordinator"]),
               ("TIMEOUT-MS", out["transaction_timeout_ms"]),
               ("START-TIME-MS", out["transaction_start_time_ms"]),
               ("PARTITIONS", " ".join(f"{p['topic']}-{p['partition']}"
                                       for p in out["partitions"]) or None)])
    return 0


def txn_abort(args) -> int:
    """As kafka-transactions.sh abort: find the open transaction on the partition
    (DescribeProducers) and have its leader write the abort marker (WriteTxnMarkers)."""
    from kafka import TopicPartition
    from kafka.admin import AbortTransactionSpec
    tp = TopicPartition(args.topic, args.partition)
    conn = connection_from(args)
    with admin(conn) as client:
        state = client.describe_producers([tp])[tp]
        open_ones = [p for p in state.active_producers
                     if p.current_transaction_start_offset >= 0
                     and (args.producer_id is None or p.producer_id == args.producer_id)]
        if not open_ones:
            raise CliError(f"no open transaction on {args.topic}-{args.partition}"
                           + (f" from producer {args.producer_id}"
                              if args.producer_id is not None else ""))
        if len(open_ones) > 1:
            raise CliError(f"{len(open_ones)} open transactions on {args.topic}-"
                           f"{args.partition}; choose one with --producer-id "
                           f"({', '.join(str(p.producer_id) for p in open_ones)})", status=2)
        p = open_ones[0]
        client.abort_transaction(AbortTransactionSpec(tp, p.producer_id, p.producer_epoch,
                                                      p.coordinator_epoch))
    out = {"topic": args.topic, "partition": args.partition, "producer_id": p.producer_id,
           "producer_epoch": p.producer_epoch,
           "start_offset": p.current_transaction_start_offset, "aborted": True}
    if args.format == "json":
        emit_json(out)
    else:
        print(f"aborted the transaction of producer {p.producer_id} (epoch {p.producer_epoch}) "
              f"on {args.topic}-{args.partition}, open since offset "
              f"{p.current_transaction_start_offset}")
    return 0


# -- cluster --------------------------------------------------------------------------------

def cluster_info(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        cluster = client.describe_cluster()
        features = client.describe_features()
        apis = client.api_versions()
    out = {
        "cluster_id": cluster["cluster_id"], "controller": cluster["controller_id"],
        "nodes": [{"id": b["broker_id"], "host": b["host"], "port": b["port"],
                   "rack": b.get("rack"), "fenced": b.get("is_fenced", False)}
                  for b in sorted(cluster["brokers"], key=lambda b: b["broker_id"])],
        "features": {name: {"supported": list(f["supported"]) if "supported" in f else None,
                            "finalized": list(f["finalized"]) if "finalized" in f else None}
                     for name, f in sorted(features.items())},
        "api_versions": [{"api_key": int(key), "name": key.name, "min": v[0], "max": v[1]}
                         for key, v in sorted(apis.items(), key=lambda kv: int(kv[0]))],
    }
    if args.format == "json":
        emit_json(out)
        return 0
    pairs([("CLUSTER-ID", out["cluster_id"]), ("CONTROLLER", out["controller"])])
    section("NODES")
    table(["ID", "HOST", "PORT", "RACK", "FENCED"],
          [[n["id"], n["host"], n["port"], n["rack"], str(n["fenced"]).lower()]
           for n in out["nodes"]])
    section("FEATURES")
    table(["NAME", "SUPPORTED", "FINALIZED"],
          [[name, _range(f["supported"]), _range(f["finalized"])]
           for name, f in out["features"].items()])
    section("API VERSIONS")
    table(["KEY", "NAME", "MIN", "MAX"],
          [[a["api_key"], a["name"], a["min"], a["max"]] for a in out["api_versions"]])
    return 0


def _range(pair) -> str | None:
    return None if pair is None else f"{pair[0]}-{pair[1]}"
