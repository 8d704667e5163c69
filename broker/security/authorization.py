"""The broker's side of the authorizer: asks it about a request's connection and keeps its ACLs
in the data directory.

Handlers hold ``broker.authorizer``: None when ``authorizer.class.name`` is empty (every request
is allowed, nothing else is paid), else an :class:`Authorization`. They ask with the request's
context (``ctx.conn.principal``, ``ctx.conn.client_host``), e.g.::

    auth = broker.authorizer
    if auth is not None and not auth.allowed(ctx, READ, GROUP, group_id): ...
"""
from __future__ import annotations

import ipaddress
import json
import os
from typing import Callable, Iterable

import structlog

from ..errors import ConfigError
from ..log.files import write_json
from .authorizer import (CLUSTER_NAME, SUPPORTED_OPERATIONS, AclBinding, AclBindingFilter,
                         AclOperation, ResourceType, StandardAuthorizer, operations_bitfield,
                         parse_super_users)

log = structlog.get_logger("broker.authorizer")

#: the ACL file in the data directory (Kafka keeps ACLs as records of its metadata log)
FILE_NAME = "acls.json"


class AclFile:
    """The ACLs as one JSON file, replaced atomically (write, fsync, rename) at every change."""

    def __init__(self, data_dir: str | None) -> None:
        self.path = os.path.join(data_dir, FILE_NAME) if data_dir else None

    def load(self) -> list[AclBinding]:
        """The stored ACLs; a file that cannot be read stops the start with a clear message
        (refusing every request, or allowing them, would be wrong either way)."""
        if self.path is None or not os.path.exists(self.path):
            return []
        try:
            with open(self.path) as f:
                data = json.load(f)
            return [AclBinding.from_json(row) for row in data["acls"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{self.path} is not a readable ACL file: {exc!r}") from None

    def save(self, acls: Iterable[AclBinding]) -> None:
        if self.path is None:
            return
        write_json(self.path, {"version": 1, "acls": [a.to_json() for a in acls]})


_HOSTS: dict[str, str] = {}   # client address -> Kafka's form of it
_MAX_HOSTS = 4096


def kafka_host_address(host: str) -> str:
    """A client address as Kafka compares it with an ACL's host (Java's
    InetAddress.getHostAddress): IPv4 as is, an IPv4-mapped IPv6 address as its IPv4 address,
    other IPv6 addresses uncompressed ("0:0:0:0:0:0:0:1" for ::1)."""
    if ":" not in host:
        return host
    shown = _HOSTS.get(host)
    if shown is None:
        address, _, scope = host.partition("%")
        try:
            ip = ipaddress.IPv6Address(address)
        except ValueError:
            return host
        if ip.ipv4_mapped is not None:
            shown = str(ip.ipv4_mapped)
        else:
            shown = ":".join(format(int(group, 16), "x") for group in ip.exploded.split(":"))
            if scope:
                shown += "%" + scope
        if len(_HOSTS) >= _MAX_HOSTS:
            _HOSTS.clear()
        _HOSTS[host] = shown
    return shown


def _who(conn) -> tuple[str, str]:
    """(principal, host) of a connection, as the authorizer takes them."""
    return str(conn.principal), kafka_host_address(conn.client_host)


class Authorization:
    """The StandardAuthorizer of a broker and its ACL file."""

    def __init__(self, authorizer: StandardAuthorizer, store: AclFile) -> None:
        self.authorizer = authorizer
        self.store = store

    @classmethod
    def from_config(cls, config) -> "Authorization | None":
        if not config["authorizer.class.name"].strip():
            return None
        store = AclFile(config["log.dirs"])
        acls = store.load()
        authorizer = StandardAuthorizer(parse_super_users(config["super.users"]),
                                        config["allow.everyone.if.no.acl.found"], acls)
        log.info("authorizer started", acls=len(acls),
                 super_users=sorted(authorizer.super_users),
                 allow_everyone_if_no_acl_found=authorizer.allow_if_no_acl)
        return cls(authorizer, store)

    # -- decisions about a request ----------------------------------------------------------

    def allowed(self, ctx, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        principal, host = _who(ctx.conn)
        return self.authorizer.authorize(principal, host, op, rtype, name)

    def cluster(self, ctx, op: AclOperation) -> bool:
        return self.allowed(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)

    def allowed_names(self, ctx, op: AclOperation, rtype: ResourceType,
                      names: Iterable[str]) -> set[str]:
        """The names among ``names`` allowed, each decided once however often it repeats."""
        principal, host = _who(ctx.conn)
        authorize = self.authorizer.authorize
        return {n for n in set(names) if authorize(principal, host, op, rtype, n)}

    def predicate(self, ctx, op: AclOperation, rtype: ResourceType) -> Callable[[str], bool]:
        """``name -> allowed``, remembering each answer for the rest of the request."""
        principal, host = _who(ctx.conn)
        authorize = self.authorizer.authorize
        seen: dict[str, bool] = {}

        def check(name: str) -> bool:
            verdict = seen.get(name)
            if verdict is None:
                verdict = seen[name] = authorize(principal, host, op, rtype, name)
            return verdict
        return check

    def describable_topics(self, ctx) -> Callable[[str], bool]:
        """The topics a consumer-group member's regular expression may resolve to."""
        return self.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC)

    def by_resource_type(self, ctx, op: AclOperation, rtype: ResourceType) -> bool:
        principal, host = _who(ctx.conn)
        return self.authorizer.authorize_by_resource_type(principal, host, op, rtype)

    def operations(self, ctx, rtype: ResourceType, name: str) -> int:
        principal, host = _who(ctx.conn)
        return self.authorizer.authorized_operations(principal, host, rtype, name)

    # -- changes (CreateAcls, DeleteAcls) ---------------------------------------------------

    def create(self, acls: list[AclBinding]) -> None:
        added = sum(self.authorizer.add(acl) for acl in acls)
        if added:
            self.store.save(self.authorizer.acls)
            log.info("acls created", acls=added, total=len(self.authorizer.acls))

    def delete(self, filters: list[AclBindingFilter],
               limit: int) -> list[list[AclBinding]] | None:
        """Each filter's matches among the ACLs as they were before the request (an ACL two
        filters match is in both answers, as Kafka's controller answers), all removed; None,
        and nothing removed, when they are more than ``limit``."""
        deleted = [self.authorizer.matching(f) for f in filters]
        gone = {acl for rows in deleted for acl in rows}
        if len(gone) > limit:
            return None
        for acl in gone:
            self.authorizer.remove(acl)
        if gone:
            self.store.save(self.authorizer.acls)
            log.info("acls deleted", acls=len(gone), total=len(self.authorizer.acls))
        return deleted


def authorized_operations(auth: Authorization | None, ctx, rtype: ResourceType, name: str) -> int:
    """An authorized_operations field asked for: every operation of the resource type without
    an authorizer, as Kafka answers."""
    if auth is None:
        return operations_bitfield(SUPPORTED_OPERATIONS[rtype])
    return auth.operations(ctx, rtype, name)


def cluster_authorized_operations(auth: Authorization | None, ctx) -> int:
    """The cluster's authorized_operations: 0 for a principal that may not DESCRIBE it."""
    if auth is not None and not auth.cluster(ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(auth, ctx, ResourceType.CLUSTER, CLUSTER_NAME)


def group_denied(auth: Authorization | None, ctx, group_id: str,
                 op: AclOperation = AclOperation.READ) -> bool:
    """With an authorizer, whether ``ctx`` may not ``op`` the group: the check Kafka's KafkaApis
    makes before it asks its group coordinator (READ for the group APIs, DELETE to delete)."""
    return auth is not None and not auth.allowed(ctx, op, ResourceType.GROUP, group_id)


def take_unreadable_topics(auth, ctx, request) -> list:
    """The request's topics the principal may not READ, taken out of the request (Kafka answers
    them TOPIC_AUTHORIZATION_FAILED beside the coordinator's answer for the others). A topic
    whose id is unknown (no name) is left for UNKNOWN_TOPIC_ID, which Kafka decides first."""
    may_read = auth.predicate(ctx, AclOperation.READ, ResourceType.TOPIC)
    denied = [t for t in request.topics if t.name is not None and not may_read(t.name)]
    if denied:
        request.topics = [t for t in request.topics if t.name is None or may_read(t.name)]
    return denied
