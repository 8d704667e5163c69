"""ApiVersions as a whole: the broker advertises every API Kafka 4.3.1 advertises, each over
exactly Kafka's version range, and nothing more (the session's two brokers, with the same
group and transaction settings). Clients pick their versions from this table; kafka-python
even infers the broker's release from it."""
from __future__ import annotations

from protocol.messages import APIS, ApiVersionsRequest
from tests.support import RawClient


def advertised(port: int) -> dict[str, tuple[int, int]]:
    response = RawClient.once(port, ApiVersionsRequest(client_software_name="conformance",
                                                       client_software_version="1"), 3)
    assert response.error_code == 0
    return {APIS[k.api_key].name if k.api_key in APIS else str(k.api_key):
            (k.min_version, k.max_version) for k in response.api_keys}


def test_every_api_at_kafkas_versions(kafka_server, kbroker_server):
    kafka = advertised(kafka_server.port)
    ours = advertised(kbroker_server.port)
    missing = sorted(set(kafka) - set(ours))
    extra = sorted(set(ours) - set(kafka))
    different = {name: (ours[name], kafka[name]) for name in set(kafka) & set(ours)
                 if ours[name] != kafka[name]}
    assert (missing, extra, different) == ([], [], {}), (
        f"missing {missing}, not on Kafka {extra}, (ours, Kafka's): {different}")
    assert len(ours) == len(kafka) == 75
