"""Fixtures of the TLS tests: development certificates made once per session by
``kbroker certs`` (broker/security/certs.py), and brokers with an SSL listener beside a
PLAINTEXT one."""
from __future__ import annotations

import pytest

from broker.security.certs import make_certs
from tests.support import BrokerProcess, free_port

PASSWORD = "kbroker-test"


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """The files of `kbroker certs` (paths by file name) and their password."""
    made = make_certs(str(tmp_path_factory.mktemp("certs")), password=PASSWORD)
    return made


def ssl_listener_settings(certs, port: int, ssl_port: int, **more) -> dict:
    """kbroker's (and Kafka's) settings for PLAINTEXT on ``port`` and SSL on ``ssl_port``, with
    the PKCS12 keystore."""
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": certs["paths"]["broker.p12"],
        "ssl.keystore.password": certs["password"],
        **more,
    }


class SslBroker(BrokerProcess):
    """A BrokerProcess with an SSL listener; ``ssl_bootstrap`` is its address."""

    def __init__(self, certs, **more) -> None:
        port, ssl_port = free_port(), free_port()
        while ssl_port == port:
            ssl_port = free_port()
        super().__init__(port=port, overrides=ssl_listener_settings(certs, port, ssl_port,
                                                                    **more))
        self.ssl_port = ssl_port

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"


@pytest.fixture(scope="module")
def ssl_broker(certs):
    broker = SslBroker(certs)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def mtls_broker(certs):
    """ssl.client.auth=required with the development CA as truststore (PKCS12), and a mapping
    rule that makes the client certificate User:kbroker-client; debug logs show each TLS
    connection's principal."""
    broker = SslBroker(certs, **{
        "ssl.client.auth": "required",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": certs["paths"]["truststore.p12"],
        "ssl.truststore.password": certs["password"],
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Development,O=kbroker$/$1/L,DEFAULT",
        "log.level": "debug"})
    broker.start()
    yield broker
    broker.stop()
