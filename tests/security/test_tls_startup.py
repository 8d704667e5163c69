"""The kbroker process with TLS settings from the environment (Kafka's image names), and refused
at start, with exit code 2 and the reason on stderr, when a TLS setting cannot work."""
from __future__ import annotations

import socket
import ssl
import subprocess
import sys

import pytest

from tests.support import ROOT, BrokerProcess, free_port


def api_versions_over_tls(certs, port: int, with_certificate: bool) -> str:
    ctx = ssl.create_default_context(cafile=certs["paths"]["ca.crt"])
    if with_certificate:
        ctx.load_cert_chain(certs["paths"]["client.crt"], certs["paths"]["client.key"])
    try:
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                             server_hostname="localhost") as sock:
            request = bytes.fromhex("0012000000000001") + b"\x00\x04test"
            sock.sendall(len(request).to_bytes(4, "big") + request)
            return "answered" if len(sock.recv(4)) == 4 else "closed"
    except (ssl.SSLError, ConnectionError):
        return "refused"


def test_settings_from_kafka_environment_names(certs):
    port, ssl_port = free_port(), free_port()
    broker = BrokerProcess(port=port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}"}, env={
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "KAFKA_SSL_KEYSTORE_TYPE": "PKCS12",
        "KAFKA_SSL_KEYSTORE_LOCATION": certs["paths"]["broker.p12"],
        "KAFKA_SSL_KEYSTORE_PASSWORD": certs["password"],
        "KAFKA_LISTENER_NAME_SSL_SSL_CLIENT_AUTH": "required",
        "KAFKA_LISTENER_NAME_SSL_SSL_TRUSTSTORE_TYPE": "PEM",
        "KAFKA_LISTENER_NAME_SSL_SSL_TRUSTSTORE_LOCATION": certs["paths"]["ca.crt"]})
    broker.start()
    try:
        assert api_versions_over_tls(certs, ssl_port, with_certificate=True) == "answered"
        assert api_versions_over_tls(certs, ssl_port, with_certificate=False) != "answered"
    finally:
        broker.stop()
    assert certs["password"] not in broker.logs()


@pytest.mark.parametrize("settings,message", [
    ({}, "listener SSL: SSL listener SSL has no keystore"),
    ({"ssl.keystore.location": "BROKER_P12"},
     "listener SSL: SSL key store is specified, but key store password is not specified."),
    ({"ssl.keystore.location": "BROKER_P12", "ssl.keystore.password": "wrong"},
     "listener SSL: Failed to load SSL keystore"),
    ({"ssl.client.auth": "sometimes"},
     "listener SSL: Invalid value sometimes for configuration ssl.client.auth"),
])
def test_refused_at_start(certs, settings, message):
    port, ssl_port = free_port(), free_port()
    cmd = [sys.executable, "-m", "broker", "--metrics-port", "0", "--log-format", "json",
           "--override", f"listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
           "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL",
           "--override", "ssl.keystore.type=PKCS12"]
    for name, value in settings.items():
        value = certs["paths"]["broker.p12"] if value == "BROKER_P12" else value
        cmd += ["--override", f"{name}={value}"]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=30,
                            env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"kbroker: {message}" in result.stderr
