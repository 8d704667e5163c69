"""A table of (group state, request) -> (error, state afterwards), in Kafka's classic protocol.

Each state is built by real requests: a Stable group of members A (leader) and B at generation 1;
CompletingRebalance before anyone synced; PreparingRebalance after B rejoined; Empty after both
left (generation 2); Dead while its deletion is being written; "none" for a group never seen.
"""
from __future__ import annotations

import pytest

from tests.coordinator.harness import E, Harness, assignment, subscription
from tests.coordinator.group.classic.test_scenarios import form


def build(state: str):
    h = Harness()
    ids = {}
    if state == "none":
        return h, ids
    if state == "dead":
        h.commit("g", {("t", 0): 1})
        h.log.auto = False
        reply = _delete(h, "g")
        assert not reply.done and h.state() == "Dead"
        return h, ids
    a1 = h.join(client_id="a", tick=False)
    b1 = h.join(client_id="b", tick=False)
    a = h.join(member_id=a1.member_id, client_id="a", tick=False)
    b = h.join(member_id=b1.member_id, client_id="b", tick=False)
    h.tick()
    ids = {"A": a.member_id, "B": b.member_id, "gen": a.generation_id}
    assert a.leader == ids["A"]
    if state == "completing":
        return h, ids
    h.sync("g", ids["A"], 1, {ids["A"]: assignment(t=[0]), ids["B"]: assignment(t=[1])})
    h.sync("g", ids["B"], 1)
    assert h.state() == "Stable"
    if state == "stable":
        return h, ids
    if state == "preparing":
        # B rejoins with a new subscription: a rebalance starts and waits for A
        h.join(member_id=ids["B"], client_id="b", protocols=(("range", subscription("t", "u")),))
        assert h.state() == "PreparingRebalance"
        return h, ids
    if state == "empty":
        h.leave("g", ids["A"], ids["B"])
        assert h.state() == "Empty" and h.group().generation_id == 2
        ids["gen"] = 2
        return h, ids
    raise AssertionError(state)


def _delete(h, *groups):
    from protocol import messages as m
    from tests.coordinator.harness import Ctx, Reply
    reply = Reply()
    h.coordinator.delete_groups(m.DeleteGroupsRequest(groups_names=list(groups)), 2, Ctx(), reply)
    return reply


def member_error(reply):
    return E(reply.members[0].error_code) if reply.members else E(reply.error_code)


def commit_error(reply):
    return E(reply.topics[0].partitions[0].error_code)


R = {
    "join_new_v9": lambda h, i: h.join(),
    "join_new_v3": lambda h, i: h.join(version=3),
    "join_A": lambda h, i: h.join(member_id=i["A"], client_id="a"),
    "join_B": lambda h, i: h.join(member_id=i["B"], client_id="b"),
    "join_unknown_id": lambda h, i: h.join(member_id="nobody-1"),
    "join_other_protocol": lambda h, i: h.join(protocols=(("roundrobin", b"x"),)),
    "join_other_type": lambda h, i: h.join(protocol_type="connect"),
    "hb_A": lambda h, i: h.heartbeat("g", i["A"], i["gen"]),
    "hb_A_old_gen": lambda h, i: h.heartbeat("g", i["A"], i["gen"] - 1),
    "hb_unknown": lambda h, i: h.heartbeat("g", "nobody-1", 1),
    "sync_A": lambda h, i: h.sync("g", i["A"], i["gen"], {i["A"]: b"a", i["B"]: b"b"}),
    "sync_B": lambda h, i: h.sync("g", i["B"], i["gen"]),
    "sync_B_old_gen": lambda h, i: h.sync("g", i["B"], i["gen"] - 1),
    "sync_unknown": lambda h, i: h.sync("g", "nobody-1", 1),
    "sync_wrong_protocol": lambda h, i: h.sync("g", i["B"], i["gen"], protocol_name="rr"),
    "commit_A": lambda h, i: h.commit("g", {("t", 0): 7}, generation=i["gen"],
                                      member_id=i["A"]),
    "commit_A_old_gen": lambda h, i: h.commit("g", {("t", 0): 7}, generation=i["gen"] - 1,
                                              member_id=i["A"]),
    "commit_unknown": lambda h, i: h.commit("g", {("t", 0): 7}, generation=1,
                                            member_id="nobody-1"),
    "commit_simple": lambda h, i: h.commit("g", {("t", 0): 7}),
    "commit_gen1_v8": lambda h, i: h.commit("g", {("t", 0): 7}, generation=1, member_id="x"),
    "commit_gen1_v9": lambda h, i: h.commit("g", {("t", 0): 7}, generation=1, member_id="x",
                                            version=9),
    "leave_A": lambda h, i: h.leave("g", i["A"]),
    "leave_unknown": lambda h, i: h.leave("g", "nobody-1"),
}

ERR = {"join": lambda r: E(r.error_code), "hb": lambda r: E(r.error_code),
       "sync": lambda r: E(r.error_code), "commit": commit_error, "leave": member_error}

PENDING = None  # no response yet (a delayed operation holds it)

TABLE = [
    # state, request, expected error, state afterwards
    ("none", "join_new_v9", E.MEMBER_ID_REQUIRED, "Empty"),
    ("none", "join_new_v3", E.NONE, "CompletingRebalance"),
    ("none", "join_unknown_id", E.UNKNOWN_MEMBER_ID, None),
    ("none", "hb_unknown", E.UNKNOWN_MEMBER_ID, None),
    ("none", "sync_unknown", E.UNKNOWN_MEMBER_ID, None),
    ("none", "commit_simple", E.NONE, "Empty"),
    ("none", "commit_gen1_v8", E.ILLEGAL_GENERATION, None),
    ("none", "commit_gen1_v9", E.GROUP_ID_NOT_FOUND, None),
    ("none", "leave_unknown", E.UNKNOWN_MEMBER_ID, None),

    ("empty", "join_new_v9", E.MEMBER_ID_REQUIRED, "Empty"),
    ("empty", "join_new_v3", E.NONE, "CompletingRebalance"),
    ("empty", "join_other_type", E.MEMBER_ID_REQUIRED, "Empty"),
    ("empty", "join_A", E.UNKNOWN_MEMBER_ID, "Empty"),
    ("empty", "hb_A", E.UNKNOWN_MEMBER_ID, "Empty"),
    ("empty", "sync_A", E.UNKNOWN_MEMBER_ID, "Empty"),
    ("empty", "commit_simple", E.NONE, "Empty"),
    ("empty", "commit_A", E.UNKNOWN_MEMBER_ID, "Empty"),
    ("empty", "leave_A", E.UNKNOWN_MEMBER_ID, "Empty"),

    ("preparing", "join_new_v9", E.MEMBER_ID_REQUIRED, "PreparingRebalance"),
    ("preparing", "join_new_v3", PENDING, "PreparingRebalance"),
    ("preparing", "join_A", E.NONE, "CompletingRebalance"),
    ("preparing", "join_unknown_id", E.UNKNOWN_MEMBER_ID, "PreparingRebalance"),
    ("preparing", "join_other_protocol", E.INCONSISTENT_GROUP_PROTOCOL, "PreparingRebalance"),
    ("preparing", "hb_A", E.REBALANCE_IN_PROGRESS, "PreparingRebalance"),
    ("preparing", "hb_A_old_gen", E.ILLEGAL_GENERATION, "PreparingRebalance"),
    ("preparing", "sync_A", E.REBALANCE_IN_PROGRESS, "PreparingRebalance"),
    ("preparing", "commit_A", E.NONE, "PreparingRebalance"),
    ("preparing", "commit_A_old_gen", E.ILLEGAL_GENERATION, "PreparingRebalance"),
    ("preparing", "commit_simple", E.UNKNOWN_MEMBER_ID, "PreparingRebalance"),
    ("preparing", "leave_A", E.NONE, "CompletingRebalance"),

    ("completing", "join_new_v9", E.MEMBER_ID_REQUIRED, "CompletingRebalance"),
    ("completing", "join_new_v3", PENDING, "PreparingRebalance"),
    ("completing", "join_B", E.NONE, "CompletingRebalance"),
    ("completing", "hb_A", E.NONE, "CompletingRebalance"),
    ("completing", "hb_A_old_gen", E.ILLEGAL_GENERATION, "CompletingRebalance"),
    ("completing", "sync_A", PENDING, "Stable"),  # answered when B syncs? no: see below
    ("completing", "sync_B", PENDING, "CompletingRebalance"),
    ("completing", "sync_B_old_gen", E.ILLEGAL_GENERATION, "CompletingRebalance"),
    ("completing", "sync_unknown", E.UNKNOWN_MEMBER_ID, "CompletingRebalance"),
    ("completing", "sync_wrong_protocol", E.INCONSISTENT_GROUP_PROTOCOL, "CompletingRebalance"),
    ("completing", "commit_A", E.REBALANCE_IN_PROGRESS, "CompletingRebalance"),
    ("completing", "commit_simple", E.UNKNOWN_MEMBER_ID, "CompletingRebalance"),
    ("completing", "leave_A", E.NONE, "PreparingRebalance"),

    ("stable", "join_new_v9", E.MEMBER_ID_REQUIRED, "Stable"),
    ("stable", "join_new_v3", PENDING, "PreparingRebalance"),
    ("stable", "join_B", E.NONE, "Stable"),             # follower, same metadata
    ("stable", "join_A", PENDING, "PreparingRebalance"),  # the leader's JoinGroup rebalances
    ("stable", "join_other_protocol", E.INCONSISTENT_GROUP_PROTOCOL, "Stable"),
    ("stable", "hb_A", E.NONE, "Stable"),
    ("stable", "hb_A_old_gen", E.ILLEGAL_GENERATION, "Stable"),
    ("stable", "hb_unknown", E.UNKNOWN_MEMBER_ID, "Stable"),
    ("stable", "sync_B", E.NONE, "Stable"),
    ("stable", "sync_B_old_gen", E.ILLEGAL_GENERATION, "Stable"),
    ("stable", "commit_A", E.NONE, "Stable"),
    ("stable", "commit_A_old_gen", E.ILLEGAL_GENERATION, "Stable"),
    ("stable", "commit_unknown", E.UNKNOWN_MEMBER_ID, "Stable"),
    ("stable", "commit_simple", E.UNKNOWN_MEMBER_ID, "Stable"),
    ("stable", "leave_A", E.NONE, "PreparingRebalance"),
    ("stable", "leave_unknown", E.UNKNOWN_MEMBER_ID, "Stable"),

    ("dead", "join_new_v9", E.COORDINATOR_NOT_AVAILABLE, "Dead"),
    ("dead", "hb_unknown", E.COORDINATOR_NOT_AVAILABLE, "Dead"),
    ("dead", "sync_unknown", E.COORDINATOR_NOT_AVAILABLE, "Dead"),
    ("dead", "commit_simple", E.COORDINATOR_NOT_AVAILABLE, "Dead"),
    ("dead", "leave_unknown", E.COORDINATOR_NOT_AVAILABLE, "Dead"),
]


@pytest.mark.parametrize("state,request_name,error,after", TABLE,
                         ids=[f"{s}-{r}" for s, r, _, _ in TABLE])
def test_state_request_table(state, request_name, error, after):
    h, ids = build(state)
    if state == "completing" and request_name == "sync_A":
        # the leader's SyncGroup stores the assignment and the group becomes Stable; the
        # leader is answered at once since the log completes writes immediately here
        error = E.NONE
    reply = R[request_name](h, ids)
    kind = request_name.split("_")[0]
    if error is PENDING:
        assert not reply.done, reply
    else:
        assert reply.done and ERR[kind](reply.value) == error, reply
    assert h.state() == after


def test_validation_order_of_join_group():
    h = Harness()
    # empty group id before an invalid session timeout
    assert h.join(group="", session=1).error == E.INVALID_GROUP_ID
    # invalid session timeout before a protocol problem
    assert h.join(session=1, protocols=()).error == E.INVALID_SESSION_TIMEOUT
    assert h.join(session=1800001).error == E.INVALID_SESSION_TIMEOUT
    assert h.join(session=6000, version=3).error == E.NONE
    # no protocol in common before an unknown member id
    assert h.join(member_id="nobody", protocols=(("rr", b""),)).error == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(member_id="nobody").error == E.UNKNOWN_MEMBER_ID
    assert h.join(group="fresh", member_id="nobody", protocols=()).error == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(group="fresh", protocol_type="").error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.group("fresh") is None  # a rejected join leaves no group behind


def test_heartbeat_and_sync_with_empty_group_id():
    h = Harness()
    assert h.heartbeat("", "m", 1).error == E.INVALID_GROUP_ID
    assert h.sync("", "m", 1).error == E.INVALID_GROUP_ID
    assert h.leave("", "m").error == E.INVALID_GROUP_ID


def test_sync_v5_requires_protocol_type_and_name():
    """From SyncGroup v5 both fields are mandatory: Kafka answers a null one with
    INCONSISTENT_GROUP_PROTOCOL and an empty assignment before looking at the group id or the
    group; a value that differs from the group's gets the same. v0-4 have no such fields."""
    h = Harness()
    ids, joins = form(h, 1, sync=False)
    m, gen = ids[0], joins[0].generation_id
    for ptype, pname in ((None, None), (None, "range"), ("consumer", None),
                         ("connect", "range"), ("consumer", "roundrobin")):
        r = h.sync("g", m, gen, {m: b"x"}, protocol_type=ptype, protocol_name=pname)
        assert (r.error, r.assignment, r.protocol_type, r.protocol_name) == \
            (E.INCONSISTENT_GROUP_PROTOCOL, b"", None, None), (ptype, pname)
    assert h.state() == "CompletingRebalance" and h.group().members[m].assignment == b""
    # checked first: before an empty group id, an unknown group or an unknown member
    assert h.sync("", m, gen, protocol_name=None).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync("nope", "x", 1, protocol_type=None).error == E.INCONSISTENT_GROUP_PROTOCOL
    r = h.sync("g", m, gen, {m: b"x"}, protocol_type="consumer", protocol_name="range")
    assert (r.error, r.protocol_type, r.protocol_name, r.assignment) == \
        (E.NONE, "consumer", "range", b"x")
    for version in (0, 3, 4):
        r = h.sync("g", m, gen, version=version, protocol_type=None, protocol_name=None)
        assert (r.error, r.assignment) == (E.NONE, b"x")


def test_state_machine_transitions_are_kafkas():
    from broker.coordinator.group.group import (VALID_PREVIOUS_STATES, GroupMetadata, GroupState,
                                          IllegalGroupTransition)
    allowed = {(src, dst) for dst, srcs in VALID_PREVIOUS_STATES.items() for src in srcs}
    for src in GroupState:
        for dst in GroupState:
            group = GroupMetadata("g", 0)
            group.state = src
            if (src, dst) in allowed:
                group.transition_to(dst, 5)
                assert group.state is dst and group.state_timestamp == 5
            else:
                with pytest.raises(IllegalGroupTransition):
                    group.transition_to(dst, 5)
    assert ("Empty", "Stable") not in {(a.value, b.value) for a, b in allowed}
    assert (GroupState.STABLE, GroupState.EMPTY) not in allowed
