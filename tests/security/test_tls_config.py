"""TLS settings and the principal of an SSL connection, without sockets: Kafka's
ssl.principal.mapping.rules, the RFC 2253 subject as Java prints it, and the ssl.* settings a
listener starts with or is refused for (broker/security/tls.py, broker/config.py)."""
from __future__ import annotations

import datetime
import os
import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from broker.config import BrokerConfig, ConfigError, read_environment
from broker.security import ANONYMOUS, KafkaPrincipal
from broker.security.tls import (ListenerTls, NoMatchingRule, PrincipalMapper, TlsConfigError,
                                 handshake_timeout_s, listener_contexts, listener_ssl_settings,
                                 openssl_cipher_name, rfc2253_name)

# ---------------------------------------------------------------- ssl.principal.mapping.rules


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    "",
    ",   , , ,      , , ,   ",
])
def test_valid_rules(rules):
    PrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    "RULE:^CN=((/$1/",  # a pattern that is no regular expression
])
def test_invalid_rules_are_refused(rules):
    with pytest.raises(TlsConfigError, match="Invalid rule"):
        PrincipalMapper(rules)


def test_rules_map_in_order_first_match_wins():
    mapper = PrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT"]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    no_cn = "OU=JavaSoft,O=Sun Microsystems,C=US"
    assert mapper.name(no_cn) == no_cn


def test_escaped_comma_in_a_rule_and_in_a_name():
    mapper = PrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_no_matching_rule_and_literal_back_references():
    mapper = PrincipalMapper("RULE:^CN=(.*?),O=x$/$1/")
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=a,O=y"):
        mapper.name("CN=a,O=y")
    # $2 names no group of a one-group pattern: Kafka takes it literally
    assert PrincipalMapper("RULE:^CN=(.*?),O=x$/$1-$2/").name("CN=a,O=x") == "a-$2"
    # a replacement with a literal slash, escaped in the rule
    assert PrincipalMapper(r"RULE:^CN=(.*?),O=(.*)$/$2\/$1/").name("CN=a,O=x") == "x/a"


# ---------------------------------------------------------------- RFC 2253 subjects

def _self_signed(name: x509.Name) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))


A = x509.NameAttribute


def R(*attributes):
    return x509.RelativeDistinguishedName(list(attributes))


# expected strings printed by Java 17's X500Principal.getName() for the same certificates
@pytest.mark.parametrize("name,expected", [
    (x509.Name([A(NameOID.COUNTRY_NAME, "US"), A(NameOID.ORGANIZATION_NAME, "Acme, Inc."),
                A(NameOID.COMMON_NAME, "alice")]),
     r"CN=alice,O=Acme\, Inc.,C=US"),
    (x509.Name([A(NameOID.COMMON_NAME, " lead#and=trail+ "),
                A(NameOID.EMAIL_ADDRESS, "a@b.c")]),
     r"1.2.840.113549.1.9.1=#16056140622e63,CN=\ lead\#and\=trail\+\ "),
    (x509.Name([R(A(NameOID.COMMON_NAME, "multi"), A(NameOID.USER_ID, "u1")),
                R(A(NameOID.DOMAIN_COMPONENT, "example")), R(A(NameOID.SERIAL_NUMBER, "42")),
                R(A(NameOID.LOCALITY_NAME, 'Zürich "q" <x>;\\'))]),
     r'L=Zürich \"q\" \<x\>\;\\,2.5.4.5=#13023432,DC=example,CN=multi+UID=u1'),
    (x509.Name([A(NameOID.STATE_OR_PROVINCE_NAME, "ST"), A(NameOID.STREET_ADDRESS, "1 Main"),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "#hash"), A(NameOID.COMMON_NAME, "日本")]),
     r"CN=日本,OU=\#hash,STREET=1 Main,ST=ST"),
])
def test_subject_as_java_prints_it(name, expected):
    assert rfc2253_name(_self_signed(name).subject.public_bytes()) == expected


class FakeSslObject:
    def __init__(self, der):
        self.der = der

    def getpeercert(self, binary_form=False):
        return self.der


def test_principal_of_a_client_certificate(certs):
    with open(certs["paths"]["client.crt"], "rb") as f:
        der = x509.load_pem_x509_certificate(f.read()).public_bytes(serialization.Encoding.DER)
    listener = listener_contexts(config_with(certs, **{
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/U"}))["SSL"]
    assert listener.principal(FakeSslObject(der)) == KafkaPrincipal("User", "KBROKER-CLIENT")
    assert listener.principal(FakeSslObject(None)) == ANONYMOUS
    default = listener_contexts(config_with(certs))["SSL"]
    assert str(default.principal(FakeSslObject(der))) == \
        "User:CN=kbroker-client,OU=Development,O=kbroker"


# ---------------------------------------------------------------- settings

def config_with(certs, **settings) -> BrokerConfig:
    values = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
              "ssl.keystore.type": "PKCS12",
              "ssl.keystore.location": certs["paths"]["broker.p12"],
              "ssl.keystore.password": certs["password"]}
    values.update(settings)
    return BrokerConfig({k: v for k, v in values.items() if v is not None})


def context(certs, **settings) -> ssl.SSLContext:
    return listener_contexts(config_with(certs, **settings))["SSL"].context


def test_kafka_defaults():
    config = BrokerConfig({})
    assert config["ssl.keystore.type"] == "JKS"
    assert config["ssl.truststore.type"] == "JKS"
    assert config["ssl.client.auth"] == "none"
    assert config["ssl.protocol"] == "TLSv1.3"
    assert config["ssl.enabled.protocols"] == ("TLSv1.2", "TLSv1.3")
    assert config["ssl.principal.mapping.rules"] == "DEFAULT"


def test_handshake_bound():
    """ssl.handshake.timeout.ms (kbroker's own, 10 s), or connections.max.idle.ms when shorter;
    a bound of 0 or less is refused."""
    assert handshake_timeout_s(BrokerConfig({})) == 10.0
    assert handshake_timeout_s(BrokerConfig({"connections.max.idle.ms": 1000})) == 1.0
    assert handshake_timeout_s(BrokerConfig({"connections.max.idle.ms": -1})) == 10.0
    assert handshake_timeout_s(BrokerConfig({"ssl.handshake.timeout.ms": 60000})) == 60.0
    with pytest.raises(ConfigError, match="ssl.handshake.timeout.ms must be at least 1"):
        BrokerConfig({"ssl.handshake.timeout.ms": 0})


def test_pkcs12_keystore_and_truststore(certs):
    ctx = context(certs, **{"ssl.client.auth": "required", "ssl.truststore.type": "PKCS12",
                            "ssl.truststore.location": certs["paths"]["truststore.p12"],
                            "ssl.truststore.password": certs["password"]})
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in ctx.get_ca_certs()] == \
        [((("organizationName", "kbroker"),), (("organizationalUnitName", "Development"),),
          (("commonName", "kbroker development CA"),))]
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_3


def test_pem_files_and_inline_pem(certs):
    paths = certs["paths"]
    ctx = context(certs, **{"ssl.keystore.type": "PEM",
                            "ssl.keystore.location": paths["broker.pem"],
                            "ssl.keystore.password": None, "ssl.client.auth": "requested",
                            "ssl.truststore.type": "PEM",
                            "ssl.truststore.location": paths["ca.crt"]})
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    assert len(ctx.get_ca_certs()) == 1
    with open(paths["broker.pem"]) as f:
        text = f.read()
    key = text[:text.index("-----END PRIVATE KEY-----") + 25]
    chain = text[len(key):]
    with open(paths["ca.crt"]) as f:
        ca = f.read()
    ctx = context(certs, **{"ssl.keystore.type": "PEM", "ssl.keystore.location": None,
                            "ssl.keystore.password": None, "ssl.keystore.key": key,
                            "ssl.keystore.certificate.chain": chain,
                            "ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca})
    assert len(ctx.get_ca_certs()) == 1


def test_encrypted_pem_key_needs_ssl_key_password(certs, tmp_path):
    with open(certs["paths"]["broker.pem"], "rb") as f:
        data = f.read()
    key = serialization.load_pem_private_key(data, None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"keypass"))
    chain = data[data.index(b"-----BEGIN CERTIFICATE"):]
    path = tmp_path / "encrypted.pem"
    path.write_bytes(encrypted + chain)
    pem = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(path),
           "ssl.keystore.password": None}
    context(certs, **pem, **{"ssl.key.password": "keypass"})
    with pytest.raises(ConfigError, match="ssl.key.password"):
        context(certs, **pem)
    with pytest.raises(ConfigError, match="wrong ssl.key.password"):
        context(certs, **pem, **{"ssl.key.password": "nope"})


def test_type_jks_reads_a_pkcs12_file_as_java_does(certs):
    context(certs, **{"ssl.keystore.type": "JKS"})


def test_a_jks_file_is_refused_with_how_to_convert(certs, tmp_path):
    jks = tmp_path / "broker.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + os.urandom(64))
    with pytest.raises(ConfigError, match="is a JKS keystore, which kbroker cannot read: "
                                          "convert it to PKCS12 .keytool -importkeystore"):
        context(certs, **{"ssl.keystore.type": "JKS", "ssl.keystore.location": str(jks)})


@pytest.mark.parametrize("settings,message", [
    ({"ssl.keystore.password": None},
     "SSL key store is specified, but key store password is not specified."),
    ({"ssl.keystore.password": "wrong"}, "Failed to load SSL keystore .* of type PKCS12"),
    ({"ssl.keystore.location": None, "ssl.keystore.password": None},
     "SSL listener SSL has no keystore"),
    ({"ssl.keystore.location": None}, "SSL key store is not specified, but key store password "
                                      "is specified."),
    ({"ssl.keystore.location": "/nonexistent/broker.p12"},
     "ssl.keystore.location: cannot read /nonexistent/broker.p12"),
    ({"ssl.keystore.type": "PEM"}, "SSL key store password cannot be specified with PEM"),
    ({"ssl.keystore.key": "x"}, "SSL private key can be specified only for PEM, but key store "
                                "type is PKCS12."),
    ({"ssl.keystore.certificate.chain": "x"},
     "SSL certificate chain is specified, but private key is not specified"),
    ({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "TRUSTSTORE",
      "ssl.truststore.password": "wrong"}, "Failed to load SSL keystore .*truststore.p12"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "no pem here"},
     "ssl.truststore.certificates: no CERTIFICATE entries"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "CA",
      "ssl.truststore.password": "x"},
     "SSL trust store password cannot be specified for PEM format."),
])
def test_bad_stores_are_refused_at_start(certs, settings, message):
    settings = {k: {"TRUSTSTORE": certs["paths"]["truststore.p12"],
                    "CA": certs["paths"]["ca.crt"]}.get(v, v) for k, v in settings.items()}
    with pytest.raises(ConfigError, match=f"listener SSL: {message}"):
        context(certs, **settings)


def test_key_of_another_certificate_is_refused(certs, tmp_path):
    with open(certs["paths"]["broker.pem"], "rb") as f:
        chain = f.read()
    with open(certs["paths"]["client.key"], "rb") as f:
        other_key = f.read()
    path = tmp_path / "mismatch.pem"
    path.write_bytes(other_key + chain[chain.index(b"-----BEGIN CERTIFICATE"):])
    with pytest.raises(ConfigError, match="do not go together"):
        context(certs, **{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(path),
                          "ssl.keystore.password": None})


@pytest.mark.parametrize("settings,message", [
    ({"ssl.client.auth": "always"}, "Invalid value always for configuration ssl.client.auth"),
    ({"ssl.keystore.type": "BKS"}, "ssl.keystore.type=BKS"),
    ({"ssl.protocol": "SSLv3"}, "SSLv3 SSLContext not available"),
    ({"ssl.enabled.protocols": "TLSv1.2,TLSv1.2"}, "duplicate"),
    ({"ssl.enabled.protocols": "TLSv1.2,TLSv9"}, "unsupported protocol.s. TLSv9"),
    ({"ssl.principal.mapping.rules": "RULE:x"}, "Invalid rule"),
])
def test_bad_settings_are_refused_when_the_config_is_read(certs, settings, message):
    with pytest.raises(ConfigError, match=f"listener SSL: .*{message}"):
        config_with(certs, **settings)


def test_per_listener_settings_win_over_the_broker_wide_ones(certs):
    config = config_with(certs, **{
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": certs["paths"]["ca.crt"],
        # upper case as the listener is written is accepted too
        "listener.name.MTLS.ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/"})
    assert listener_ssl_settings(config, "SSL")["ssl.client.auth"] == "none"
    assert listener_ssl_settings(config, "MTLS")["ssl.client.auth"] == "required"
    contexts = listener_contexts(config)
    assert contexts["SSL"].context.verify_mode == ssl.CERT_NONE
    assert contexts["MTLS"].context.verify_mode == ssl.CERT_REQUIRED
    assert contexts["MTLS"].mapper.name("CN=x,O=y") == "x"
    assert contexts["SSL"].mapper.name("CN=x,O=y") == "CN=x,O=y"


def test_per_listener_setting_of_no_listener_or_setting_is_refused(certs):
    with pytest.raises(ConfigError, match="listener.name.other.ssl.client.auth names no listener"):
        config_with(certs, **{"listener.name.other.ssl.client.auth": "required"})
    with pytest.raises(ConfigError, match="unknown setting 'listener.name.ssl.log.dirs'"):
        config_with(certs, **{"listener.name.ssl.log.dirs": "/tmp"})


def test_environment_names():
    env = {"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,SSL:SSL",
           "KAFKA_SSL_KEYSTORE_LOCATION": "/certs/broker.p12",
           "KAFKA_SSL_KEYSTORE_PASSWORD": "pw",
           "KAFKA_LISTENER_NAME_SSL_SSL_CLIENT_AUTH": "required",
           "KAFKA_LISTENER_NAME_SSL_INTERNAL_SSL_KEYSTORE_PASSWORD": "other",
           "KBROKER_LISTENER_NAME_SSL_SSL_KEY_PASSWORD": "kp"}
    assert read_environment(env) == {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.location": "/certs/broker.p12",
        "ssl.keystore.password": "pw",
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl_internal.ssl.keystore.password": "other",
        "listener.name.ssl.ssl.key.password": "kp"}


def test_enabled_protocols_and_cipher_suites(certs):
    ctx = context(certs, **{"ssl.enabled.protocols": "TLSv1.2"})
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2,) * 2
    # only TLS 1.2 suites listed: TLS 1.3 cannot be negotiated, as on Java
    ctx = context(certs, **{"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,"
                                                 "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"})
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    names = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"}
    # only TLS 1.3 suites listed: TLS 1.2 cannot be negotiated
    ctx = context(certs, **{"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"})
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ConfigError, match="unsupported cipher suite TLS_FOO_WITH_BAR_SHA"):
        context(certs, **{"ssl.cipher.suites": "TLS_FOO_WITH_BAR_SHA"})


@pytest.mark.parametrize("java,openssl", [
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256"),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"),
    ("TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "DHE-RSA-CHACHA20-POLY1305"),
    ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
])
def test_cipher_suite_names(java, openssl):
    assert openssl_cipher_name(java) == openssl


def test_listener_tls_is_made_only_for_tls_listeners(certs):
    assert set(listener_contexts(config_with(certs))) == {"SSL"}
    assert isinstance(listener_contexts(config_with(certs))["SSL"], ListenerTls)


def test_kbroker_certs_command(tmp_path, capsys):
    from broker.cli import main
    assert main(["certs", "--dir", str(tmp_path), "--host", "kafka.local",
                 "--password", "secret"]) == 0
    out = capsys.readouterr().out
    assert f"ssl.keystore.location={tmp_path}/broker.p12" in out
    assert "ssl.keystore.password=secret" in out
    assert "User:CN=kbroker-client,OU=Development,O=kbroker" in out
    for name in ("ca.crt", "ca.key", "broker.pem", "broker.p12", "truststore.p12", "client.crt",
                 "client.key", "client.p12", "broker-ssl.properties", "client-ssl.properties"):
        assert (tmp_path / name).exists(), name
    assert (tmp_path / "ca.key").stat().st_mode & 0o077 == 0
    cert = x509.load_pem_x509_certificate((tmp_path / "broker.pem").read_bytes()[
        (tmp_path / "broker.pem").read_bytes().index(b"-----BEGIN CERTIFICATE"):])
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["kafka.local", "localhost"]
    # the settings it prints start a broker
    props = dict(line.split("=", 1) for line in
                 (tmp_path / "broker-ssl.properties").read_text().splitlines()
                 if line and not line.startswith("#"))
    props["listeners"] = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
    contexts = listener_contexts(BrokerConfig(props))
    assert contexts["SSL"].context.verify_mode == ssl.CERT_REQUIRED
    # made again, the CA is kept (clients that trust it keep working)
    ca = (tmp_path / "ca.crt").read_bytes()
    assert main(["certs", "--dir", str(tmp_path), "--password", "secret"]) == 0
    assert (tmp_path / "ca.crt").read_bytes() == ca
