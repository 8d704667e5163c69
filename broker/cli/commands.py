"""``kbroker topic|produce|consume|group|acl|user|txn|cluster``: everyday client commands in the
style of Redpanda's rpk, against this broker or any Kafka.

They are built on kafka-python's KafkaAdminClient, KafkaProducer and KafkaConsumer (a well-kept
client that speaks every API these commands need, up to Kafka 4.3), and on confluent-kafka only
to describe KIP-848 consumer groups, whose ConsumerGroupDescribe API kafka-python does not have
(the share and streams group APIs it lacks are sent through it: broker/cli/kafka_messages.py).
This module parses arguments and reports failures; it imports no client library itself, so
``kbroker topic --help`` answers at once. Every failure ends as one line on stderr and a
non-zero exit status, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from .errors import CliError

EXIT_USAGE = 2


def _common() -> argparse.ArgumentParser:
    """The options every client subcommand takes."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("connection")
    g.add_argument("-b", "--bootstrap", "--bootstrap-server", dest="bootstrap",
                   help="host:port[,host:port...] of the cluster (default: $KBROKER_BOOTSTRAP, "
                        "else localhost:9092)")
    g.add_argument("--command-config", metavar="FILE",
                   help="a Kafka client .properties file with security settings "
                        "(security.protocol, sasl.mechanism, sasl.jaas.config, "
                        "ssl.truststore.location of a PEM file, ...); "
                        "default $KBROKER_COMMAND_CONFIG")
    g.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="give up connecting or waiting after this long (default 10)")
    g.add_argument("-v", "--verbose", action="store_true",
                   help="print the client library's log")
    return p


def _format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: a table (default); json: for scripts")


def _command(sub, name: str, target: str, help: str, common, **kw) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help, description=help, parents=[common], **kw)
    p.set_defaults(target=target)
    return p


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    root = argparse.ArgumentParser(
        prog="kbroker", description="Client commands against kbroker or any Kafka cluster.")
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # -- topic ------------------------------------------------------------------------------
    topic = sub.add_parser("topic", help="create, list, describe, delete and configure topics")
    tsub = topic.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _command(tsub, "create", "topics:create", "create topics", common)
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, default=-1,
                   help="number of partitions (default: the broker's num.partitions)")
    p.add_argument("-r", "--replication-factor", type=int, default=-1,
                   help="replicas of each partition (default: the broker's "
                        "default.replication.factor)")
    p.add_argument("-c", "--config", action="append", default=[], metavar="NAME=VALUE",
                   help="a topic config, e.g. cleanup.policy=compact; repeatable")
    p.add_argument("--if-not-exists", action="store_true",
                   help="succeed if the topic exists already")
    _format(p)
    p = _command(tsub, "list", "topics:list_topics", "list topics", common)
    p.add_argument("-i", "--internal", action="store_true",
                   help="include internal topics (__consumer_offsets, ...)")
    _format(p)
    p = _command(tsub, "describe", "topics:describe",
                 "a topic's partitions (leader, replicas, offsets) and configs", common)
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-a", "--all-configs", action="store_true",
                   help="print every config, not only those set on the topic")
    _format(p)
    p = _command(tsub, "delete", "topics:delete", "delete topics", common)
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("--if-exists", action="store_true", help="succeed if a topic is missing")
    _format(p)
    p = _command(tsub, "alter-config", "topics:alter_config",
                 "set or delete topic configs (IncrementalAlterConfigs)", common)
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE",
                   help="set a config; repeatable")
    p.add_argument("-d", "--delete", action="append", default=[], metavar="NAME",
                   help="remove a config override (back to the default); repeatable")
    p.add_argument("--dry-run", action="store_true",
                   help="only validate the change (validate_only)")
    _format(p)
    p = _command(tsub, "add-partitions", "topics:add_partitions",
                 "raise a topic's partition count", common)
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, required=True, help="the new total count")
    _format(p)

    # -- produce ----------------------------------------------------------------------------
    p = _command(sub, "produce", "produce:run",
                 "send lines from stdin or a file as records, one record a line", common)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-f", "--file", help="read lines from this file instead of stdin")
    p.add_argument("-k", "--key", help="the key of every record")
    p.add_argument("-K", "--key-separator", metavar="SEP",
                   help="each line is KEY<SEP>VALUE (the first SEP splits)")
    p.add_argument("-H", "--header", action="append", default=[], metavar="NAME=VALUE",
                   help="a header on every record; repeatable")
    p.add_argument("--header-separator", metavar="SEP",
                   help="each line starts with headers, ended by SEP: "
                        "name:value,name:value<SEP>... (as kafka-console-producer's "
                        "parse.headers)")
    p.add_argument("-p", "--partition", type=int, help="the partition (default: the "
                   "partitioner: by key, else spread)")
    p.add_argument("-z", "--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                   default="none")
    p.add_argument("--acks", choices=["0", "1", "all", "-1"], default="all")
    p.add_argument("--progress", action="store_true",
                   help="show progress on stderr (on by default for --file on a terminal)")
    _format(p)

    # -- consume ----------------------------------------------------------------------------
    p = _command(sub, "consume", "consume:run",
                 "print records; stops at the end of the topic unless --follow", common)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-o", "--offset", default=None,
                   help="where to start: beginning, end, an offset N, or @TIME (ms since the "
                        "epoch or ISO 8601, e.g. @2026-01-31T12:00:00Z); in a group: "
                        "beginning or end when it has no committed offset (default: "
                        "beginning without a group, the committed offset in one)")
    p.add_argument("-p", "--partition", type=int, action="append", metavar="N",
                   help="only this partition; repeatable (not with --group)")
    p.add_argument("-g", "--group", help="consume as a member of this group and commit what "
                   "was printed")
    p.add_argument("-n", "--num", type=int, help="stop after N records")
    p.add_argument("--follow", action="store_true",
                   help="keep waiting for new records (stop with Ctrl-C)")
    p.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                   default="read_uncommitted")
    p.add_argument("--format", default="text",
                   help="text (the value, a line each), json (an object a line: topic, "
                        "partition, offset, timestamp, key, value, headers) or a kcat-style "
                        "format: %%t topic, %%p partition, %%o offset, %%T timestamp, %%k key, "
                        "%%s value, %%h headers, %%K/%%S key/value length, \\n \\t")
    p.add_argument("-f", dest="format", help="the same as --format with a format string")

    # -- group ------------------------------------------------------------------------------
    group = sub.add_parser("group", help="classic, consumer, share and streams groups: list, "
                                         "describe, lag, reset offsets, delete")
    gsub = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _command(gsub, "list", "groups:list_groups", "list groups with their type and state",
                 common)
    _format(p)
    p = _command(gsub, "describe", "groups:describe",
                 "a group's state, members, assignments, committed offsets (a share group's "
                 "start offsets) and lag", common)
    p.add_argument("groups", nargs="+", metavar="GROUP")
    _format(p)
    p = _command(gsub, "lag", "groups:lag", "committed offsets (a share group's start offsets) "
                 "and lag per partition", common)
    p.add_argument("groups", nargs="*", metavar="GROUP", help="default: every group")
    _format(p)
    p = _command(gsub, "reset-offsets", "groups:reset_offsets",
                 "move a group's committed offsets, or a share group's start offsets (a dry "
                 "run unless --execute); the group must have no members", common)
    p.add_argument("group", metavar="GROUP")
    p.add_argument("-t", "--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                   help="a topic, optionally only some partitions; repeatable")
    p.add_argument("--all-topics", action="store_true",
                   help="every topic the group has committed offsets for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--to-datetime", metavar="TIME",
                    help="ISO 8601 (2026-01-31T12:00:00Z) or ms since the epoch")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="move each committed offset by N (negative: back)")
    to.add_argument("--to-current", action="store_true")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true",
                      help="print the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    _format(p)
    p = _command(gsub, "delete", "groups:delete", "delete groups (they must have no members)",
                 common)
    p.add_argument("groups", nargs="+", metavar="GROUP")
    _format(p)

    # -- acl ------------------------------------------------------------------------------
    acl = sub.add_parser("acl", help="list, create and delete ACLs")
    asub = acl.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, helptext in (("list", "ACLs matching the filter (default: all)"),
                             ("create", "add an ACL"),
                             ("delete", "remove the ACLs matching the filter")):
        p = _command(asub, action, f"admin:acl_{action}", helptext, common)
        p.add_argument("--principal", help="User:NAME (create: required)")
        p.add_argument("--host", default=None, help="the client host (create default *)")
        p.add_argument("--operation", help="READ, WRITE, DESCRIBE, ALL, ... "
                       "(create: required)")
        p.add_argument("--permission", choices=["allow", "deny"], default=None)
        p.add_argument("--topic")
        p.add_argument("--group")
        p.add_argument("--transactional-id")
        p.add_argument("--cluster", action="store_true")
        p.add_argument("--pattern", choices=["literal", "prefixed", "match", "any"],
                       default=None, help="resource pattern type (create default literal)")
        _format(p)

    # -- user -----------------------------------------------------------------------------
    user = sub.add_parser("user", help="SCRAM credentials: list, create, delete")
    usub = user.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _command(usub, "list", "admin:user_list", "users with SCRAM credentials", common)
    _format(p)
    p = _command(usub, "create", "admin:user_create",
                 "create or update a user's SCRAM credential", common)
    p.add_argument("user", metavar="USER")
    p.add_argument("--password", help="default: $KBROKER_USER_PASSWORD")
    p.add_argument("--mechanism", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"],
                   default="SCRAM-SHA-256")
    p.add_argument("--iterations", type=int, default=4096)
    _format(p)
    p = _command(usub, "delete", "admin:user_delete", "delete a user's SCRAM credential",
                 common)
    p.add_argument("user", metavar="USER")
    p.add_argument("--mechanism", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"],
                   default="SCRAM-SHA-256")
    _format(p)

    # -- txn ------------------------------------------------------------------------------
    txn = sub.add_parser("txn", help="transactions: list, describe, abort")
    xsub = txn.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _command(xsub, "list", "admin:txn_list", "transactional ids and their state", common)
    _format(p)
    p = _command(xsub, "describe", "admin:txn_describe", "a transaction's state and partitions",
                 common)
    p.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL_ID")
    _format(p)
    p = _command(xsub, "abort", "admin:txn_abort",
                 "abort a hanging transaction on one partition (WriteTxnMarkers)", common)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--producer-id", type=int, help="default: the only open transaction's")
    _format(p)

    # -- cluster --------------------------------------------------------------------------
    cluster = sub.add_parser("cluster", help="the cluster's nodes, controller, features, APIs")
    csub = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _command(csub, "info", "admin:cluster_info",
                 "cluster id, nodes, controller, features and API versions", common)
    _format(p)
    return root


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    module_name, function = args.target.split(":")
    from .errors import describe, quiet_client_logs
    quiet_client_logs(args.verbose)
    bootstrap = args.bootstrap or os.environ.get("KBROKER_BOOTSTRAP") or "localhost:9092"
    try:
        module = importlib.import_module(f"{__package__}.{module_name}")
        return getattr(module, function)(args) or 0
    except CliError as exc:
        _fail(str(exc))
        return exc.status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `kbroker consume ... | head`
        _silence_stdout()
        return 0
    except Exception as exc:  # a Kafka error from the client library, reported on one line
        if args.verbose:
            import traceback
            traceback.print_exc()
        from .connection import MADE
        if MADE:  # the servers actually used (perhaps bootstrap.servers of the file)
            bootstrap = MADE[-1].bootstrap
        try:
            message = describe(exc, bootstrap, MADE[-1].protocol if MADE else None)
        except Exception:  # never a traceback, even from describing the failure
            message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        _fail(message)
        return 1


def _fail(message: str) -> None:
    sys.stdout.flush()
    print(f"kbroker: {message}", file=sys.stderr)


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
