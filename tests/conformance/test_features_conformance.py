"""Cluster features against Kafka 4.3.1 and kbroker, raw protocol: ApiVersions' supported and
finalized features, and UpdateFeatures' answers. Changes that would pass are sent with
validate_only, so the session's brokers keep their levels."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import ApiVersionsRequest, UpdateFeaturesRequest as U
from tests.support import RawClient

FAILED = "The update failed for all features since the following feature had an error: "

SUPPORTED = {"group.version": (0, 1), "kraft.version": (0, 1), "metadata.version": (7, 30),
             "share.version": (0, 1), "streams.version": (0, 1),
             "transaction.version": (0, 2), "eligible.leader.replicas.version": (0, 1)}
FINALIZED = {"group.version": 1, "kraft.version": 1, "metadata.version": 30,
             "share.version": 1, "streams.version": 1, "transaction.version": 2,
             "eligible.leader.replicas.version": 1}


def update(port: int, updates, version: int = 2, validate_only: bool = True):
    keys = []
    for name, level, kind in updates:
        key = U.FeatureUpdateKey(feature=name, max_version_level=level)
        if version == 0:
            key.allow_downgrade = bool(kind)
        else:
            key.upgrade_type = kind
        keys.append(key)
    request = U(timeout_ms=60000, feature_updates=keys)
    if version >= 1:
        request.validate_only = validate_only
    answer = RawClient.once(port, request, version)
    results = None if version >= 2 else [(r.feature, r.error_code, r.error_message)
                                         for r in answer.results]
    return answer.error_code, answer.error_message, results


def test_api_versions_lists_kafkas_features(target):
    answer = RawClient.once(target.port, ApiVersionsRequest(
        client_software_name="conformance", client_software_version="1"), 4)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert ranges[57] == (0, 2)
    assert {f.name: (f.min_version, f.max_version) for f in answer.supported_features} \
        == SUPPORTED
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in answer.finalized_features}
    expected = {n: (v, v) for n, v in FINALIZED.items()}
    assert finalized == expected
    assert answer.finalized_features_epoch > 0


@pytest.mark.parametrize("updates, message", [
    ([("nosuch", 1, 1)], "Invalid update version 1 for feature nosuch. Local controller 1 does "
                         "not support this feature."),
    ([("nosuch", 0, 2)], "Invalid update version 0 for feature nosuch. Feature nosuch not "
                         "found."),
    ([("", 1, 1)], "Invalid update version 1 for feature . Local controller 1 does not support "
                   "this feature."),
    ([("group.version", -1, 1)], "Invalid update version -1 for feature group.version. A "
                                 "feature version cannot be less than 0."),
    ([("group.version", 2, 1)], "Invalid update version 2 for feature group.version. Local "
                                "controller 1 only supports versions 0-1"),
    ([("group.version", 0, 1)], "Invalid update version 0 for feature group.version. Can't "
                                "downgrade the version of this feature without setting the "
                                "upgrade type to either safe or unsafe downgrade."),
    ([("group.version", 1, 0)], "Invalid update version 1 for feature group.version. The "
                                "controller does not support the given upgrade type."),
    ([("group.version", 1, 7)], "Invalid update version 1 for feature group.version. The "
                                "controller does not support the given upgrade type."),
    ([("metadata.version", 29, 2)], "Unsupported metadata.version downgrade from 30 to 29. "
                                    "Refusing to perform the requested downgrade because it "
                                    "might delete metadata information."),
    ([("metadata.version", 29, 3)], "Unsupported metadata.version downgrade from 30 to 29. "
                                    "Unsafe metadata downgrade is not supported in this "
                                    "version."),
    ([("metadata.version", 31, 1)], "Invalid update version 31 for feature metadata.version. "
                                    "Local controller 1 only supports versions 7-30"),
    ([("metadata.version", 6, 2)], "Invalid update version 6 for feature metadata.version. "
                                   "Local controller 1 only supports versions 7-30"),
    ([("kraft.version", 0, 2)], "Invalid update version 0 for feature kraft.version. Can't "
                                "downgrade the version of this feature."),
    # one refused update refuses them all
    ([("group.version", 0, 2), ("transaction.version", 5, 1)],
     "Invalid update version 5 for feature transaction.version. Local controller 1 only "
     "supports versions 0-2"),
])
def test_refused_updates(target, updates, message):
    assert update(target.port, updates) == (E.INVALID_UPDATE_VERSION, FAILED + message, None)
    # v1 lists no per-feature results then
    assert update(target.port, updates, version=1) == (
        E.INVALID_UPDATE_VERSION, FAILED + message, [])


@pytest.mark.parametrize("updates", [
    [("group.version", 0, 2)], [("group.version", 0, 3)], [("group.version", 1, 1)],
    [("kraft.version", 1, 1)], [("transaction.version", 1, 2)], [("transaction.version", 0, 2)],
    [("eligible.leader.replicas.version", 0, 2)],
    # a feature named twice counts once, with its last level
    [("group.version", 0, 2), ("group.version", 1, 1)],
    [],
])
def test_updates_that_pass_validation(target, updates):
    assert update(target.port, updates) == (E.NONE, None, None)
    named = [n for n, _l, _k in updates]  # as the request names them, twice if twice
    assert update(target.port, updates, version=1) == (
        E.NONE, None, [(n, E.NONE, "NONE") for n in named])


def test_v0_allow_downgrade(target):
    assert update(target.port, [("group.version", 0, False)], version=0) == (
        E.INVALID_UPDATE_VERSION, FAILED + "Invalid update version 0 for feature group.version."
        " Can't downgrade the version of this feature without setting the upgrade type to "
        "either safe or unsafe downgrade.", [])
    # the current level again: nothing changes
    assert update(target.port, [("group.version", 1, False)], version=0) == (
        E.NONE, None, [("group.version", E.NONE, "NONE")])


def kafka_tools_jar() -> str:
    """Kafka's kafka-tools jar (kafka-features.sh's FeatureCommand), which the cached Kafka
    libraries leave out: fetched once by Maven into its local repository."""
    import os
    import shutil
    import subprocess

    from .kafka_server import KAFKA_VERSION
    jar = os.path.expanduser(f"~/.m2/repository/org/apache/kafka/kafka-tools/{KAFKA_VERSION}/"
                             f"kafka-tools-{KAFKA_VERSION}.jar")
    if not os.path.isfile(jar):
        mvn = shutil.which("mvn")
        assert mvn is not None, "Maven (mvn) is needed to fetch kafka-tools"
        subprocess.run([mvn, "-q", "-B", "dependency:get", "-Dtransitive=false",
                        f"-Dartifact=org.apache.kafka:kafka-tools:{KAFKA_VERSION}"],
                       check=True, capture_output=True, timeout=600)
    return jar


def kafka_features(port: int, *args: str) -> tuple[int, list[str]]:
    """kafka-features.sh (org.apache.kafka.tools.FeatureCommand): exit code and output lines."""
    import os
    import subprocess

    from .kafka_server import java_executable, resolve_kafka_jars
    libs = resolve_kafka_jars()
    jars = [os.path.join(libs, n) for n in sorted(os.listdir(libs)) if n.endswith(".jar")]
    result = subprocess.run(
        [java_executable(), "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
         os.pathsep.join(jars + [kafka_tools_jar()]), "org.apache.kafka.tools.FeatureCommand",
         "--bootstrap-server", f"127.0.0.1:{port}", *args],
        capture_output=True, text=True, timeout=120)
    return result.returncode, result.stdout.splitlines()


def test_kafka_features_describe(target):
    import re
    code, lines = kafka_features(target.port, "describe")
    assert code == 0
    rows = {}
    for line in lines:
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        rows[fields.pop("Feature")] = fields
        assert int(fields.pop("Epoch")) > 0
    assert rows == {
        "eligible.leader.replicas.version": row("0", "1", "1"),
        "group.version": row("0", "1", "1"),
        "kraft.version": row("0", "1", "1"),
        "metadata.version": row("3.3-IV3", "4.3-IV0", "4.3-IV0"),
        "share.version": row("0", "1", "1"),
        "streams.version": row("0", "1", "1"),
        "transaction.version": row("0", "2", "2"),
    }


def row(low: str, high: str, finalized: str) -> dict:
    return {"SupportedMinVersion": low, "SupportedMaxVersion": high,
            "FinalizedVersionLevel": finalized}


@pytest.mark.parametrize("args, code, output", [
    (("upgrade", "--feature", "transaction.version=2", "--dry-run"), 0,
     ["transaction.version can be upgraded to 2."]),
    (("downgrade", "--feature", "group.version=0", "--dry-run"), 0,
     ["group.version can be downgraded to 0."]),
    (("upgrade", "--feature", "group.version=5"), 1,
     ["Could not upgrade group.version to 5. " + FAILED + "Invalid update version 5 for "
      "feature group.version. Local controller 1 only supports versions 0-1"]),
])
def test_kafka_features_upgrade_and_downgrade(target, args, code, output):
    got_code, lines = kafka_features(target.port, *args)
    assert (got_code, [line for line in lines if line.strip()][:len(output)]) == (code, output)
