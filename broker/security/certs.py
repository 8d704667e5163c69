"""``kbroker certs``: a development CA, a broker certificate and a client certificate (for mTLS),
as PEM and PKCS12 files, and the settings to paste into the broker and the clients.

Only for local development and tests: the CA key is written unencrypted next to the
certificates. A CA already in the directory (ca.crt and ca.key) is reused, so clients that trust
it keep working when the broker certificate is made again for other host names.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import secrets

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
CLIENT_SUBJECT = "CN=kbroker-client,OU=Development,O=kbroker"


def _new_key(kind: str):
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, unit: str = "Development") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kbroker"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _sign(subject: x509.Name, public_key, issuer: x509.Name, issuer_key, days: int,
          extensions: list) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days)))
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: str, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _san(hosts) -> x509.SubjectAlternativeName:
    names = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def make_certs(directory: str, hosts=(), password: str | None = None, days: int = 825,
               key_type: str = "ec", client_cn: str = "kbroker-client") -> dict:
    """Write the CA, broker and client files into ``directory``; returns their paths and the
    store password."""
    directory = os.path.abspath(directory)
    os.makedirs(directory, exist_ok=True)
    password = password or secrets.token_urlsafe(12)
    paths = {name: os.path.join(directory, name) for name in (
        "ca.crt", "ca.key", "broker.pem", "broker.p12", "truststore.p12", "client.crt",
        "client.key", "client.pem", "client.p12")}
    if os.path.exists(paths["ca.crt"]) and os.path.exists(paths["ca.key"]):
        with open(paths["ca.crt"], "rb") as f:
            ca_cert = x509.load_pem_x509_certificate(f.read())
        with open(paths["ca.key"], "rb") as f:
            ca_key = serialization.load_pem_private_key(f.read(), None)
    else:
        ca_key = _new_key(key_type)
        ca_name = _name("kbroker development CA")
        ca_cert = _sign(ca_name, ca_key.public_key(), ca_name, ca_key, days, [
            (x509.BasicConstraints(ca=True, path_length=0), True),
            (x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                           content_commitment=False, key_encipherment=False,
                           data_encipherment=False, key_agreement=False,
                           encipher_only=False, decipher_only=False), True),
            (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)])
        _write(paths["ca.key"], _key_pem(ca_key), private=True)
        _write(paths["ca.crt"], _cert_pem(ca_cert))
    encryption = serialization.BestAvailableEncryption(password.encode())

    hosts = list(dict.fromkeys([*hosts, *DEFAULT_HOSTS]))
    leaf_usage = x509.KeyUsage(digital_signature=True, key_encipherment=key_type == "rsa",
                               key_cert_sign=False, crl_sign=False, content_commitment=False,
                               data_encipherment=False, key_agreement=False,
                               encipher_only=False, decipher_only=False)
    authority = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())

    broker_key = _new_key(key_type)
    broker_cert = _sign(_name(hosts[0], "Broker"), broker_key.public_key(), ca_cert.subject,
                        ca_key, days, [
                            (x509.BasicConstraints(ca=False, path_length=None), True),
                            (leaf_usage, True),
                            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                    ExtendedKeyUsageOID.CLIENT_AUTH]), False),
                            (_san(hosts), False), (authority, False)])
    _write(paths["broker.pem"], _key_pem(broker_key) + _cert_pem(broker_cert)
           + _cert_pem(ca_cert), private=True)
    _write(paths["broker.p12"], pkcs12.serialize_key_and_certificates(
        b"kafka", broker_key, broker_cert, [ca_cert], encryption), private=True)
    _write(paths["truststore.p12"], pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(ca_cert, b"caroot")], encryption))

    client_key = _new_key(key_type)
    client_cert = _sign(_name(client_cn), client_key.public_key(), ca_cert.subject, ca_key,
                        days, [
                            (x509.BasicConstraints(ca=False, path_length=None), True),
                            (leaf_usage, True),
                            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False),
                            (authority, False)])
    _write(paths["client.crt"], _cert_pem(client_cert) + _cert_pem(ca_cert))
    _write(paths["client.key"], _key_pem(client_key), private=True)
    _write(paths["client.pem"], _key_pem(client_key) + _cert_pem(client_cert)
           + _cert_pem(ca_cert), private=True)
    _write(paths["client.p12"], pkcs12.serialize_key_and_certificates(
        b"client", client_key, client_cert, [ca_cert], encryption), private=True)

    broker_props = (
        "# kbroker or Kafka: an SSL listener beside the plaintext one\n"
        f"listeners=PLAINTEXT://{_hostport(hosts[0], 9092)},SSL://{_hostport(hosts[0], 9093)}\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL\n"
        "ssl.keystore.type=PKCS12\n"
        f"ssl.keystore.location={paths['broker.p12']}\n"
        f"ssl.keystore.password={password}\n"
        "# mTLS: clients must show a certificate signed by the CA\n"
        "ssl.client.auth=required\n"
        "ssl.truststore.type=PKCS12\n"
        f"ssl.truststore.location={paths['truststore.p12']}\n"
        f"ssl.truststore.password={password}\n"
        "# the same with PEM files: ssl.keystore.type=PEM, "
        f"ssl.keystore.location={paths['broker.pem']} (no password), ssl.truststore.type=PEM, "
        f"ssl.truststore.location={paths['ca.crt']}\n")
    client_props = (
        "# Java client (or kafka-console-*.sh --command-config)\n"
        "security.protocol=SSL\n"
        "ssl.truststore.type=PKCS12\n"
        f"ssl.truststore.location={paths['truststore.p12']}\n"
        f"ssl.truststore.password={password}\n"
        "# with ssl.client.auth=required on the broker:\n"
        "ssl.keystore.type=PKCS12\n"
        f"ssl.keystore.location={paths['client.p12']}\n"
        f"ssl.keystore.password={password}\n")
    _write(os.path.join(directory, "broker-ssl.properties"), broker_props.encode(), private=True)
    _write(os.path.join(directory, "client-ssl.properties"), client_props.encode(), private=True)
    other_clients = (
        "# librdkafka (confluent-kafka, kcat -X ...)\n"
        f"security.protocol=ssl ssl.ca.location={paths['ca.crt']} "
        f"ssl.certificate.location={paths['client.crt']} ssl.key.location={paths['client.key']}\n"
        "# kafka-python / aiokafka\n"
        f"security_protocol='SSL', ssl_cafile='{paths['ca.crt']}', "
        f"ssl_certfile='{paths['client.crt']}', ssl_keyfile='{paths['client.key']}'\n"
        "# kafkajs\n"
        f"ssl: {{ ca: [fs.readFileSync('{paths['ca.crt']}')], "
        f"cert: fs.readFileSync('{paths['client.crt']}'), "
        f"key: fs.readFileSync('{paths['client.key']}') }}\n")
    return {"directory": directory, "password": password, "hosts": hosts, "paths": paths,
            "client_subject": rfc2253(client_cert), "broker_properties": broker_props,
            "client_properties": client_props, "other_clients": other_clients}


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def rfc2253(cert: x509.Certificate) -> str:
    from .tls import rfc2253_name
    return rfc2253_name(cert.subject.public_bytes())


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(
        prog="kbroker certs",
        description="Make a development CA, a broker certificate and a client certificate "
                    "(PEM and PKCS12) and print the settings that use them. For local use "
                    "only.")
    p.add_argument("--dir", default="./certs", help="where to write the files (default ./certs)")
    p.add_argument("--host", action="append", default=[],
                   help="a host name or address clients use to reach the broker; repeatable "
                        "(localhost, 127.0.0.1 and ::1 are always included)")
    p.add_argument("--password", help="password of the PKCS12 files (default: random)")
    p.add_argument("--days", type=int, default=825, help="validity (default 825 days)")
    p.add_argument("--key-type", choices=["ec", "rsa"], default="ec",
                   help="ec (P-256, default) or rsa (2048 bits)")
    p.add_argument("--client-cn", default="kbroker-client",
                   help="common name of the client certificate (default kbroker-client)")
    args = p.parse_args(argv)
    made = make_certs(args.dir, args.host, args.password, args.days, args.key_type,
                      args.client_cn)
    print(f"wrote a development CA, broker and client certificates to {made['directory']} "
          f"(broker host names: {', '.join(made['hosts'])})\n")
    print("== broker settings (also in broker-ssl.properties; as environment variables: "
          "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP, KAFKA_SSL_KEYSTORE_LOCATION, ...)")
    print(made["broker_properties"])
    print("== Java client settings (also in client-ssl.properties)")
    print(made["client_properties"])
    print("== other clients")
    print(made["other_clients"])
    print(f"the client certificate's principal: User:{made['client_subject']}")
    return 0
