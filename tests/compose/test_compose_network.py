"""How a service of the stack reaches the broker: by its compose name (BOOTSTRAP_SERVERS, here
broker:29093), and the broker's metadata sends it back to that same name, the advertised listener
of the network it came in on (the host, on listener EXTERNAL, is sent to localhost instead)."""
from __future__ import annotations

from kafka import KafkaAdminClient


def test_metadata_names_the_broker_as_this_service_reached_it(bootstrap, security):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compose-network", **security)
    try:
        brokers = admin.describe_cluster()["brokers"]
    finally:
        admin.close()
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    assert [(b["host"], b["port"]) for b in brokers] == [(host, int(port))]
