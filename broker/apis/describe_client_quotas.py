"""DescribeClientQuotas: the stored quotas of the entities a filter matches (kafka-configs.sh
--describe --entity-type users/clients/ips, Admin.describeClientQuotas), as Kafka's
ClientQuotasImage.describe answers it.

A filter component names an entity type and matches it exactly (a name), as the default entity
(MATCH_TYPE_DEFAULT) or as any entity of the type (MATCH_TYPE_SPECIFIED); an entity matches when
it has every type the filter names, matched so, and in strict mode no other type. A bad filter
fails the whole request (entries null) with Kafka's code and message. With an authorizer it needs
DESCRIBE_CONFIGS on the cluster."""
from __future__ import annotations

from broker.client_quotas import CLIENT_ID, IP, USER
from broker.security.authorizer import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import DescribeClientQuotasResponse

NAME = "DescribeClientQuotas"

MATCH_TYPE_EXACT = 0
MATCH_TYPE_DEFAULT = 1
MATCH_TYPE_SPECIFIED = 2

Response = DescribeClientQuotasResponse
EntryData = Response.EntryData
EntityData = Response.EntityData
ValueData = Response.ValueData


class FilterError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def parse_filter(components) -> tuple[dict, set]:
    """(exact: type -> name or None for the default, specified: types matched by any name),
    or FilterError with Kafka's code and message."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise FilterError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise FilterError(ErrorCode.INVALID_REQUEST,
                              f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in (IP, USER, CLIENT_ID):
            raise FilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if c.match_type == MATCH_TYPE_EXACT:
            if c.match is None:
                raise FilterError(ErrorCode.INVALID_REQUEST, "Request specified "
                                  "MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = c.match
        elif c.match_type == MATCH_TYPE_DEFAULT:
            if c.match is not None:
                raise FilterError(ErrorCode.INVALID_REQUEST, "Request specified "
                                  "MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[kind] = None
        elif c.match_type == MATCH_TYPE_SPECIFIED:
            if c.match is not None:
                raise FilterError(ErrorCode.INVALID_REQUEST, "Request specified "
                                  "MATCH_TYPE_SPECIFIED, but also specified a match string.")
            specified.add(kind)
        else:
            raise FilterError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    named = set(exact) | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise FilterError(ErrorCode.INVALID_REQUEST,
                          "Invalid entity filter component combination. IP filter component "
                          "should not be used with user or clientId filter component.")
    return exact, specified


def matches(entity: dict, exact: dict, specified: set, strict: bool) -> bool:
    if strict and len(entity) != len(exact) + len(specified):
        return False
    for kind, name in exact.items():
        if kind not in entity or entity[kind] != name:
            return False
    return all(kind in entity for kind in specified)


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        respond(Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         error_message=None, entries=None))
        return
    try:
        exact, specified = parse_filter(request.components)
    except FilterError as exc:
        respond(Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message,
                         entries=None))
        return
    entries = []
    for entity, quotas in broker.client_quotas.store.entities.items():
        named = dict(entity)
        if matches(named, exact, specified, request.strict):
            entries.append(EntryData(
                entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                values=[ValueData(key=k, value=v) for k, v in sorted(quotas.items())]))
    respond(Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
                     entries=entries))
