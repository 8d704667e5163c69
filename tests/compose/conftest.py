"""The integration-test service of docker-compose.yml: a kafka-python consumer-group suite run
against the broker named by BOOTSTRAP_SERVERS (host:port[,host:port]); METRICS_URL, when set,
is the broker's metrics endpoint (http://host:port). SECURITY_PROTOCOL (SASL_PLAINTEXT),
SASL_MECHANISM, SASL_USERNAME and SASL_PASSWORD, when set, are how the clients authenticate.

Without BOOTSTRAP_SERVERS there is no broker to test, so nothing here is collected: the main
suite runs this one in the compose stack's tests service (tests/containers/), and against broker
processes (tests/integration/test_operations.py, tests/testing/test_compose_faults.py).
"""
from __future__ import annotations

import os

import pytest

if not os.environ.get("BOOTSTRAP_SERVERS"):
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def bootstrap() -> str:
    return os.environ["BOOTSTRAP_SERVERS"]


@pytest.fixture(scope="session")
def security() -> dict:
    """kafka-python's security settings for every client of the suite (none: PLAINTEXT)."""
    protocol = os.environ.get("SECURITY_PROTOCOL", "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return {}
    return {"security_protocol": protocol,
            "sasl_mechanism": os.environ.get("SASL_MECHANISM", "PLAIN"),
            "sasl_plain_username": os.environ.get("SASL_USERNAME"),
            "sasl_plain_password": os.environ.get("SASL_PASSWORD")}


@pytest.fixture(scope="session")
def metrics_url() -> str | None:
    return os.environ.get("METRICS_URL") or None
