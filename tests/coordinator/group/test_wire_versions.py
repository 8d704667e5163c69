"""Every response the coordinator builds encodes at every version the broker advertises."""
from __future__ import annotations

import pytest

from protocol import messages as m

from tests.coordinator.harness import E, Ctx, Harness, Reply
from tests.coordinator.group.test_offsets import delete_groups, fetch_v8, list_groups, offset_delete
from tests.coordinator.group.classic.test_scenarios import form


def roundtrip(response, version):
    data = response.encode(version)
    return type(response).decode(data, version)


@pytest.mark.parametrize("version", range(0, 10))
def test_join_group_versions(version):
    h = Harness()
    first = h.join(version=version, client_id="c")
    decoded = roundtrip(first.value, version)
    if version >= 4:
        assert decoded.error_code == E.MEMBER_ID_REQUIRED
        reply = h.join(member_id=first.member_id, version=version, client_id="c")
    else:
        reply = first
    decoded = roundtrip(reply.value, version)
    assert decoded.error_code == 0 and decoded.generation_id == 1
    assert roundtrip(h.join(group="", version=version).value, version).error_code == \
        E.INVALID_GROUP_ID
    assert roundtrip(h.join(member_id="x", version=version).value, version).error_code == \
        E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", range(0, 6))
def test_sync_heartbeat_leave_versions(version):
    h = Harness()
    ids, joins = form(h, 1, sync=False)
    sync = h.sync("g", ids[0], 1, {ids[0]: b"a"}, version=version)
    assert roundtrip(sync.value, version).assignment == b"a"
    assert roundtrip(h.sync("g", "x", 1, version=version).value, version).error_code == \
        E.UNKNOWN_MEMBER_ID
    if version <= 4:
        hb = h.heartbeat("g", ids[0], 1, version=version)
        assert roundtrip(hb.value, version).error_code == 0
    leave = h.leave("g", ids[0], version=version)
    assert roundtrip(leave.value, version).error_code == 0


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit_versions(version):
    h = Harness()
    reply = h.commit("g", {("t", 0): 1}, version=version)
    assert roundtrip(reply.value, version).topics[0].partitions[0].error_code == 0


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch_versions(version):
    h = Harness()
    h.commit("g", {("t", 0): 1})
    if version >= 8:
        reply = fetch_v8(h, {"g": {"t": [0]}, "h": None}, version=version)
        assert roundtrip(reply.value, version).groups[0].topics[0].partitions[0] \
            .committed_offset == 1
    else:
        reply = h.fetch("g", {"t": [0]}, version=version)
        assert roundtrip(reply.value, version).topics[0].partitions[0].committed_offset == 1


@pytest.mark.parametrize("version", range(0, 7))
def test_describe_list_delete_versions(version):
    h = Harness()
    form(h, 1, group="g")
    h.commit("e", {("t", 0): 1})
    reply = Reply()
    h.coordinator.describe_groups(m.DescribeGroupsRequest(groups=["g", "nope"],
                                                          include_authorized_operations=True),
                                  version, Ctx(), reply)
    decoded = roundtrip(reply.value, version)
    assert decoded.groups[0].group_state == "Stable"
    if version <= 5:
        assert roundtrip(list_groups(h, version=version).value, version).error_code == 0
    if version <= 2:
        assert roundtrip(delete_groups(h, "e").value, version).results[0].error_code == 0
    if version == 0:
        assert roundtrip(offset_delete(h, "g", {"t": [0]}).value, 0).error_code == 0
