"""The built-in web console, served by the HTTP port (broker/http/server.py) at ``/``: a
page (static/, packaged with the broker, nothing from elsewhere) that polls the JSON endpoints
below. ``console.enable`` turns it off; ``console.actions.enable`` allows the actions
(actions.py), which are off by default. The endpoint binds ``metrics.host``, loopback by
default; the server has checked each request's Host, Origin and content type (broker/http/
guard.py) and, with an authorizer, its login: ``caller`` is who it is, and the console shows
and does only what that principal's ACLs allow, as Kafka's APIs would.

GET  /api/overview
GET  /api/topics?filter=&internal=&offset=&limit=
GET  /api/topics/<topic>
GET  /api/topics/<topic>/messages?partition=&from=offset|timestamp|end|beginning&offset=
     &timestamp=&limit=
GET  /api/groups?filter=&state=&type=&offset=&limit=
GET  /api/groups/<group>
GET  /api/broker?offset=&limit=            (connections are paged)
POST /api/topics                           {"name", "partitions", "replication_factor", "configs"}
DELETE /api/topics/<topic>
POST /api/topics/<topic>/messages          {"partition", "key", "value", "headers"}
POST /api/groups/<group>/reset-offsets     {"to": earliest|latest|timestamp, "timestamp", "topic"}
DELETE /api/groups/<group>
"""
from __future__ import annotations

import json
from importlib import resources
from urllib.parse import parse_qsl, unquote

import structlog

from ..security.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from . import actions, views
from .views import BadRequest, Loading, NotFound

log = structlog.get_logger("broker.console")

#: the largest request body an action reads
MAX_BODY = 1 << 20
STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/console.js": ("console.js", "text/javascript; charset=utf-8"),
          "/console.css": ("console.css", "text/css; charset=utf-8")}

Answer = tuple  # (status, content type, body bytes)


def _json(status: str, value) -> Answer:
    return status, "application/json", json.dumps(value, separators=(",", ":")).encode()


class Console:
    """Answers the console's paths for the metrics endpoint's HTTP server."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.actions_enabled = broker.config["console.actions.enable"]
        self.lag_history = views.LagHistory()
        self.rates = views.RequestRates()
        self._assets: dict[str, bytes] = {}

    @staticmethod
    def serves(path: str) -> bool:
        return path in STATIC or path == "/api" or path.startswith("/api/")

    def asset(self, path: str) -> Answer:
        name, ctype = STATIC[path]
        body = self._assets.get(name)
        if body is None:
            body = self._assets[name] = (resources.files(__package__) / "static" / name) \
                .read_bytes()
        return "200 OK", ctype, body

    async def handle(self, method: str, target: str, body: bytes, caller) -> Answer:
        path, _, query_text = target.partition("?")
        if path in STATIC:
            if method not in ("GET", "HEAD"):
                return _json("405 Method Not Allowed", {"error": "GET only"})
            return self.asset(path)
        query = dict(parse_qsl(query_text, keep_blank_values=True))
        parts = [unquote(p) for p in path.split("/")[2:]]
        try:
            if method in ("GET", "HEAD"):
                return _json("200 OK", self._get(parts, query, caller))
            if method in ("POST", "DELETE"):
                return await self._act(method, parts, body, caller)
            return _json("405 Method Not Allowed", {"error": f"{method} is not served"})
        except BadRequest as exc:
            return _json("400 Bad Request", {"error": "BAD_REQUEST", "message": str(exc)})
        except NotFound as exc:
            return _json("404 Not Found", {"error": "NOT_FOUND", "message": str(exc)})
        except Loading as exc:
            return _json("503 Service Unavailable", {"error": "COORDINATOR_LOAD_IN_PROGRESS",
                                                     "message": str(exc)})
        except actions.ActionError as exc:
            return _json(exc.status, exc.to_dict())
        except views.Unauthorized as exc:
            return _json("403 Forbidden", {"error": exc.code.name, "error_code": int(exc.code),
                                           "message": str(exc)})

    # -- reads

    def _get(self, parts: list, query: dict, caller):
        """A view, as much of it as ``caller`` may see: topics it may DESCRIBE (records: READ,
        as Fetch needs), groups it may DESCRIBE, the broker view with DESCRIBE_CONFIGS on the
        cluster (it shows the settings)."""
        broker = self.broker
        topics = caller.predicate(AclOperation.DESCRIBE, ResourceType.TOPIC)
        groups = caller.predicate(AclOperation.DESCRIBE, ResourceType.GROUP)
        match parts:
            case ["overview"]:
                restricted = caller.authorization is not None
                return {"node_id": broker.node_id, "cluster_id": broker.cluster_id,
                        "topics": sum(map(topics, broker.topics.topics)) if restricted
                        else len(broker.topics.topics),
                        "groups": sum(1 for g in views.live_groups(broker) if groups(g.group_id))
                        if restricted else broker.coordinator.group_count(),
                        "actions": self.actions_enabled, "now": broker.clock(),
                        "principal": str(caller.principal)}
            case ["topics"]:
                return views.topic_list(broker, query, topics)
            case ["topics", name]:
                views.require(topics(name), views.TOPIC_DENIED, name)
                return views.topic_detail(broker, name)
            case ["topics", name, "messages"]:
                views.require(caller.may(AclOperation.READ, ResourceType.TOPIC, name),
                              views.TOPIC_DENIED, name)
                return views.messages(broker, name, query)
            case ["groups"]:
                return views.group_list(broker, query, self.lag_history, groups, topics)
            case ["groups", group_id]:
                views.require(groups(group_id), views.GROUP_DENIED, group_id)
                return views.group_detail(broker, group_id, self.lag_history, topics)
            case ["broker"]:
                views.require(caller.may(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER,
                                         CLUSTER_NAME), views.CLUSTER_DENIED, CLUSTER_NAME)
                return views.broker_view(broker, self.rates, query, self.actions_enabled)
        raise NotFound("no such console endpoint")

    # -- actions

    async def _act(self, method: str, parts: list, body: bytes, caller) -> Answer:
        """An action, as the Kafka API it calls answers ``caller`` (its ACLs included)."""
        if not self.actions_enabled:
            return _json("403 Forbidden", {
                "error": "ACTIONS_DISABLED",
                "message": "the console is read-only: set console.actions.enable=true"})
        document = {}
        if method == "POST":  # declared application/json: the server checked
            try:
                document = json.loads(body or b"{}")
            except ValueError as exc:
                raise BadRequest(f"the body is not JSON: {exc}") from None
            if not isinstance(document, dict):
                raise BadRequest("the body must be a JSON object")
        broker = self.broker
        match (method, parts):
            case ("POST", ["topics"]):
                result = await actions.create_topic(broker, document, caller)
            case ("DELETE", ["topics", name]):
                result = await actions.delete_topic(broker, name, caller)
            case ("POST", ["topics", name, "messages"]):
                result = await actions.produce(broker, name, document, caller)
            case ("POST", ["groups", group_id, "reset-offsets"]):
                result = await actions.reset_offsets(broker, group_id, document, caller)
            case ("DELETE", ["groups", group_id]):
                result = await actions.delete_group(broker, group_id, caller)
            case _:
                raise NotFound("no such console action")
        shown = dict(result)
        if "offsets" in shown:  # a reset of thousands of partitions: their count only
            shown["offsets"] = len(shown["offsets"])
        log.info("console action", method=method, path="/".join(parts), result=shown,
                 principal=str(caller.principal))
        return _json("200 OK", result)
