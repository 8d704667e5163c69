"""AlterClientQuotas: set or remove the quotas of user, client-id and IP entities
(kafka-configs.sh --alter --add-config producer_byte_rate=..., Admin.alterClientQuotas), with
the checks, codes and messages of Kafka's ClientQuotaControlManager:

* an entity's types are user, client-id and ip (a type named twice keeps its last name); IP does
  not combine with the others; an empty name is refused (None is the default entity);
* the keys are those of the entity's kind (broker/client_quotas.py CLIENT_KEYS, IP_KEYS), a value
  is above 0, and integral for the LONG and INT keys, within their range;
* an entity named twice in one request, or a key named twice for an entity, is answered
  "Ignoring duplicate entity ..." (the first alteration of a twice-named entity still applies);
* each entity's alteration applies whole or not at all; validate_only applies nothing.

An IP entity must be an address or a host name that resolves, as on Kafka: host names are
resolved off the event loop before the answer. Changes are persisted at once (--data-dir) and
the quota managers see them at once. With an authorizer it needs ALTER_CONFIGS on the cluster."""
from __future__ import annotations

import asyncio
import ipaddress
import socket

import structlog

from broker.client_quotas import CLIENT_ID, CLIENT_KEYS, IP, IP_KEYS, USER, entity_key
from broker.security.authorizer import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import AlterClientQuotasResponse

NAME = "AlterClientQuotas"

log = structlog.get_logger("broker.apis.alter_client_quotas")

Response = AlterClientQuotasResponse
EntryData = Response.EntryData
EntityData = Response.EntityData

#: the longest entity name stored (Kafka's metadata records hold a string of at most 32767 bytes;
#: a longer one fails the request there too)
MAX_NAME_BYTES = 32767
#: entities stored at most; past it new entities are refused (each costs memory and disk)
MAX_ENTITIES = 100_000

_LIMITS = {"long": (2 ** 63 - 1, "a LONG"), "int": (2 ** 31 - 1, "an INT")}


def entity_text(entity: dict) -> str:
    """Kafka's ClientQuotaEntity.toString, as its messages print it."""
    inner = ", ".join(f"{t}={n}" if n is not None else f"{t}=null" for t, n in entity.items())
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _check_entity(entity: dict) -> str | None:
    if not entity:
        return "Invalid empty client quota entity"
    for kind, name in entity.items():
        if name == "" and kind in (USER, CLIENT_ID, IP):
            return f"Empty {kind} not supported"
    for kind in entity:
        if kind not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {kind}"
    if IP in entity and len(entity) > 1:
        return ("Invalid quota entity combination, IP entity shouldnot be combined with User "
                "or ClientId")
    return None


def _check_value(keys: dict, key: str, value: float) -> str | None:
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "double":
        return None
    limit, article = _LIMITS[kind]
    if value > limit:
        return f"Proposed value for {key} is too large for {article}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Alteration:
    __slots__ = ("entity", "ops", "skipped", "answer")

    def __init__(self, entity: dict) -> None:
        self.entity = entity
        self.ops: dict[str, float | None] = {}
        #: a key named twice: nothing of it applies
        self.skipped = False
        #: the message answered instead of the outcome (the entity was named again)
        self.answer: str | None = None


def _collect(request) -> list[Alteration]:
    """One alteration per distinct entity, in the order they first appear. As on Kafka, a
    later entry of the same entity is ignored, and the entity's answer says so even though its
    first alteration applies."""
    seen: dict = {}
    for entry in request.entries:
        entity = {}
        for e in entry.entity:
            entity.pop(e.entity_type, None)  # the last name of a type counts, as on Kafka
            entity[e.entity_type] = e.entity_name
        key = entity_key(entity)
        ignored = f"Ignoring duplicate entity {entity_text(entity)}"
        first = seen.get(key)
        if first is not None:
            first.answer = ignored
            continue
        alteration = seen[key] = Alteration(entity)
        for op in entry.ops:
            if op.key in alteration.ops:
                alteration.skipped = True
                alteration.answer = ignored
            alteration.ops[op.key] = None if op.remove else op.value
    return list(seen.values())


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.ALTER_CONFIGS):
        respond(Response(throttle_time_ms=0, entries=[
            EntryData(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                      error_message="Cluster authorization failed.",
                      entity=[EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                              for e in entry.entity])
            for entry in request.entries]))
        return
    for entry in request.entries:
        for e in entry.entity:
            if e.entity_name is not None and len(e.entity_name.encode()) > MAX_NAME_BYTES:
                # Kafka fails writing the record and drops the connection
                respond(None)
                ctx.conn.close_after_answers(
                    f"AlterClientQuotas entity name over {MAX_NAME_BYTES} bytes")
                return
    alterations = _collect(request)
    hosts = {a.entity[IP] for a in alterations
             if not a.skipped and IP in a.entity and len(a.entity) == 1
             and a.entity[IP] and not _is_ip(a.entity[IP])}
    if not hosts:
        _finish(broker, ctx, request, respond, alterations, set())
        return

    async def resolve_then_finish() -> None:
        loop = asyncio.get_running_loop()

        async def resolves(host: str) -> bool:
            try:
                await asyncio.wait_for(loop.getaddrinfo(host, None, type=socket.SOCK_STREAM), 10)
            except (OSError, UnicodeError, asyncio.TimeoutError):
                return False
            return True

        names = sorted(hosts)
        ok = await asyncio.gather(*(resolves(h) for h in names))
        unresolved = {h for h, good in zip(names, ok) if not good}
        _finish(broker, ctx, request, respond, alterations, unresolved)

    asyncio.get_running_loop().create_task(resolve_then_finish())


def _finish(broker, ctx, request, respond, alterations, unresolved: set) -> None:
    store = broker.client_quotas.store
    results = []
    changed = False
    for a in alterations:
        error = _check_entity(a.entity) if not a.skipped else a.answer
        if error is None and IP in a.entity and a.entity[IP] in unresolved:
            error = f"{a.entity[IP]} is not a valid IP or resolvable host."
        key = entity_key(a.entity)
        if error is None:
            keys = IP_KEYS if IP in a.entity else CLIENT_KEYS
            for k, value in a.ops.items():
                if value is not None:
                    error = _check_value(keys, k, value)
                    if error:
                        break
        if error is None and key not in store.entities and len(store.entities) >= MAX_ENTITIES \
                and any(v is not None for v in a.ops.values()):
            error = f"Too many client quota entities (at most {MAX_ENTITIES})"
        if error is None and not request.validate_only:
            changed |= store.apply(key, a.ops)
        if a.answer is not None:
            error = a.answer
        results.append(EntryData(
            error_code=ErrorCode.INVALID_REQUEST if error else ErrorCode.NONE,
            error_message=error,
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in a.entity.items()]))
    if changed:
        store.changed()
        log.info("client quotas altered", principal=str(ctx.conn.principal),
                 entities=len(alterations))
    respond(Response(throttle_time_ms=0, entries=results))
