"""The test controls of the HTTP port, as JSON: faults (broker/faults.py) and nodes
(Broker.node_down/node_up). The server (server.py) has already checked the request's Host,
Origin, login, content type and ``metrics.write.enable``."""
from __future__ import annotations

import json

from .guard import Answer, json_answer

#: largest body POST /faults reads
MAX_FAULT_BODY = 1 << 20


def nodes(broker, method: str, path: str) -> Answer:
    """``GET /nodes`` lists the nodes with their state; ``POST /nodes/<id>/down`` and
    ``POST /nodes/<id>/up`` take one down and bring it back."""
    parts = path.strip("/").split("/")
    if method == "GET" and parts == ["nodes"]:
        return json_answer("200 OK", broker.nodes_state())
    if method == "POST" and len(parts) == 3 and parts[2] in ("down", "up") and \
            parts[1].lstrip("-").isdigit():
        node = int(parts[1])
        try:
            change = broker.node_down if parts[2] == "down" else broker.node_up
            return json_answer("200 OK", change(node))
        except ValueError as exc:
            return json_answer("409 Conflict", {"error": str(exc)})
    return json_answer("405 Method Not Allowed",
                       {"error": "GET /nodes; POST /nodes/<id>/down or /nodes/<id>/up"})


def faults(broker, method: str, path: str, data: bytes) -> Answer:
    """``POST /faults`` adds one (or a list), ``GET /faults`` lists them with how many times
    each fired, ``DELETE /faults`` clears them and ``DELETE /faults/<id>`` removes one."""
    from ..faults import FaultError
    store = broker.faults
    fault_id = path[len("/faults/"):] if path.startswith("/faults/") else None
    try:
        if method == "GET" and fault_id is None:
            return json_answer("200 OK", store.list())
        if method == "POST" and fault_id is None:
            spec = json.loads(data or b"null")
            specs = spec if isinstance(spec, list) else [spec]
            added = [store.add(s).to_dict() for s in specs]
            return json_answer("201 Created", added if isinstance(spec, list) else added[0])
        if method == "DELETE" and fault_id is None:
            return json_answer("200 OK", {"cleared": store.clear()})
        if method == "DELETE" and fault_id.isdigit():
            if store.remove(int(fault_id)):
                return json_answer("200 OK", {"removed": int(fault_id)})
            return json_answer("404 Not Found", {"error": f"no fault {fault_id}"})
    except (FaultError, json.JSONDecodeError) as exc:
        return json_answer("400 Bad Request", {"error": str(exc)})
    return json_answer("405 Method Not Allowed",
                       {"error": "GET, POST or DELETE /faults; DELETE /faults/<id>"})
