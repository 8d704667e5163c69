"""Security settings of the client commands from a Kafka client properties file
(``--command-config``), against kbroker processes with a SASL_PLAINTEXT listener and with an
SSL listener that requires a client certificate: the right settings work, wrong ones are one
line (authentication failed, TLS handshake failed) without waiting for the bootstrap timeout."""
from __future__ import annotations

import time

from tests.cli.support import json_lines, kbroker, ok, one_line_error
from tests.conformance.test_share_group_conformance import ShareMember
from tests.support import BrokerProcess, RawClient, free_port, unique


def test_sasl_command_config(tmp_path):
    """Security settings from a Kafka client properties file: SCRAM with the right password
    works, a wrong one is one line saying authentication failed."""
    from tests.security.sasl_support import kbroker_overrides
    port = free_port()
    broker = BrokerProcess(overrides=kbroker_overrides(port), port=port)
    broker.start()
    try:
        good = tmp_path / "client.properties"
        good.write_text(
            "# as Kafka's tools take --command-config\n"
            "security.protocol=SASL_PLAINTEXT\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" \\\n    password="alice-secret";\n')
        bad = tmp_path / "bad.properties"
        bad.write_text(good.read_text().replace("alice-secret", "wrong"))
        topic = unique("sasl")
        b = broker.bootstrap
        ok(kbroker("topic", "create", topic, "-b", b, "--command-config", str(good)))
        ok(kbroker("produce", topic, "-b", b, "--command-config", str(good), input="secret\n"))
        assert ok(kbroker("consume", topic, "-b", b, "--command-config", str(good))) == \
            "secret\n"
        for args in (("topic", "list"), ("produce", topic), ("consume", topic),
                     ("group", "list")):
            started = time.monotonic()
            one_line_error(kbroker(*args, "-b", b, "--command-config", str(bad), input="x\n"),
                           "authentication failed", "SASL_AUTHENTICATION_FAILED")
            # a wrong password is not retried until the 10 s bootstrap timeout
            assert time.monotonic() - started < 5
        one_line_error(kbroker("topic", "list", "-b", b, "--timeout", "2"),
                       f"could not connect to {b}: socket disconnected", "--command-config")
        plain = tmp_path / "plain.properties"
        plain.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         "sasl.username=admin\nsasl.password=admin-secret\n")
        assert topic in ok(kbroker("topic", "list", "-b", b, "--command-config", str(plain)))
        typo = tmp_path / "typo.properties"
        typo.write_text("security.protocl=SASL_PLAINTEXT\n")
        one_line_error(kbroker("topic", "list", "-b", b, "--command-config", str(typo)),
                       "unknown client properties", "security.protocl")
    finally:
        broker.stop()

def test_tls_command_config(tmp_path):
    """ssl.* settings of the properties file: the CA as a PEM truststore and the client's PEM
    certificate and key for a listener that requires one (ssl.client.auth=required)."""
    from broker.security.certs import make_certs
    made = make_certs(str(tmp_path / "certs"), password="cli-test")
    paths = made["paths"]
    port, ssl_port = free_port(), free_port()
    broker = BrokerProcess(port=port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": paths["broker.p12"],
        "ssl.keystore.password": "cli-test", "ssl.client.auth": "required",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": paths["truststore.p12"],
        "ssl.truststore.password": "cli-test"})
    broker.start()
    try:
        b = f"127.0.0.1:{ssl_port}"
        mtls = tmp_path / "mtls.properties"
        mtls.write_text("security.protocol=SSL\n"
                        "ssl.truststore.type=PEM\n"
                        f"ssl.truststore.location={paths['ca.crt']}\n"
                        f"ssl.certificate.location={paths['client.crt']}\n"
                        f"ssl.key.location={paths['client.key']}\n")
        topic = unique("tls")
        ok(kbroker("topic", "create", topic, "-b", b, "--command-config", str(mtls)))
        ok(kbroker("produce", topic, "-b", b, "--command-config", str(mtls), input="sealed\n"))
        assert ok(kbroker("consume", topic, "-b", b, "--command-config", str(mtls))) == \
            "sealed\n"
        # a share group (a member heartbeating on the plaintext listener) described over TLS:
        # the share group APIs go through the same connections as the others
        member = ShareMember(RawClient(port), unique("tls-share"), (topic, None))
        try:
            assert member.heartbeat().error_code == 0
            (desc,) = json_lines(kbroker("group", "describe", member.group, "-b", b,
                                         "--command-config", str(mtls), "--format", "json"))
        finally:
            member.client.close()
        assert (desc["type"], [m["member_id"] for m in desc["members"]]) == \
            ("share", [member.member_id])
        p12 = tmp_path / "p12.properties"
        p12.write_text("security.protocol=SSL\nssl.truststore.type=PKCS12\n"
                       f"ssl.truststore.location={paths['truststore.p12']}\n")
        one_line_error(kbroker("topic", "list", "-b", b, "--command-config", str(p12)),
                       "ssl.truststore.type=PKCS12 is not supported", "PEM")
        no_cert = tmp_path / "no-cert.properties"
        no_cert.write_text("security.protocol=SSL\n"
                           f"ssl.truststore.location={paths['ca.crt']}\n")
        started = time.monotonic()
        one_line_error(kbroker("topic", "list", "-b", b, "--command-config", str(no_cert)),
                       f"could not connect to {b}: TLS handshake failed",
                       "CERTIFICATE_REQUIRED")
        untrusted = tmp_path / "untrusted.properties"
        untrusted.write_text("security.protocol=SSL\n")
        one_line_error(kbroker("topic", "list", "-b", b, "--command-config", str(untrusted)),
                       f"could not connect to {b}: TLS handshake failed",
                       "CERTIFICATE_VERIFY_FAILED")
        assert time.monotonic() - started < 8  # neither waits for the 10 s bootstrap timeout
    finally:
        broker.stop()
