"""The SASL mechanisms and their settings, without a connection: the JAAS parser, SCRAM against
RFC 7677's test vector, the SCRAM credential store and its bootstrap, PLAIN, the unsecured
OAUTHBEARER validator (injected clock), and the settings' checks."""
from __future__ import annotations

import base64
import json
import os

import pytest

from broker.config import BrokerConfig, ConfigError, read_environment
from broker.security.jaas import (JaasError, parse_jaas_config, parse_jaas_file,
                                  parse_single_module)
from broker.security.sasl import SaslListener
from broker.security.oauthbearer import OAuthBearerServer, UnsecuredValidator
from broker.security.plain import PlainServer
from broker.security.sasl_errors import SaslAuthenticationError, SaslError
from broker.security.scram import (SCRAM_SHA_256, SCRAM_SHA_512, ScramCredentialStore,
                                   ScramServer, make_credential, parse_bootstrap)

from .sasl_support import (PLAIN_JAAS, ScramClient, listener_settings, oauth_initial_response,
                           unsecured_jwt)

# -- JAAS


def test_jaas_plain_module_with_users():
    entry = parse_single_module(PLAIN_JAAS)
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.control_flag == "REQUIRED"
    assert entry.options == {"username": "admin", "password": "admin-secret",
                             "user_admin": "admin-secret", "user_alice": "alice-secret"}


def test_jaas_quotes_escapes_comments_and_several_entries():
    text = ('/* first */ a.B required k1="x\\"y;z" k2=\'single\' k3=word // end\n;'
            ' c.D optional;')
    entries = parse_jaas_config(text)
    assert [(e.login_module, e.control_flag) for e in entries] == [("a.B", "REQUIRED"),
                                                                    ("c.D", "OPTIONAL")]
    assert entries[0].options == {"k1": 'x"y;z', "k2": "single", "k3": "word"}
    assert entries[1].options == {}


@pytest.mark.parametrize("text,message", [
    ("", "Login module not specified in JAAS config"),
    ("a.B", "Login module control flag not specified in JAAS config"),
    ("a.B sometimes;", "Invalid login module control flag 'sometimes' in JAAS config"),
    ('a.B required user_x="secret"', "JAAS config entry not terminated by semi-colon"),
    ("a.B required user_x=;", "Value not specified for key 'user_x' in JAAS config"),
    ("a.B required user_x=1234;", "Value not specified for key 'user_x' in JAAS config"),
])
def test_jaas_errors_name_the_problem_never_the_value(text, message):
    with pytest.raises(JaasError) as exc:
        parse_jaas_config(text)
    assert str(exc.value) == message
    assert "secret" not in str(exc.value)


def test_broker_jaas_takes_exactly_one_module():
    with pytest.raises(JaasError, match="contains 2 login modules, should be 1 module"):
        parse_single_module("a.B required; c.D required;")


# -- SCRAM

RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def test_scram_sha_256_rfc7677_vector():
    credential = make_credential(SCRAM_SHA_256, "pencil", 4096, RFC7677_SALT)
    server = ScramServer(SCRAM_SHA_256, {"user": credential}.get,
                         nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


def test_scram_rfc7677_vector_with_a_wrong_proof_fails():
    credential = make_credential(SCRAM_SHA_256, "pencil", 4096, RFC7677_SALT)
    server = ScramServer(SCRAM_SHA_256, {"user": credential}.get,
                         nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(SaslError, match="Invalid client credentials"):
        server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVU=")
    assert not server.complete


def test_scram_sha_512_round_trip_and_keys_only():
    credential = make_credential(SCRAM_SHA_512, "pencil", 8192)
    assert "pencil" not in repr(credential) and "hidden" in repr(credential)
    client = ScramClient("SCRAM-SHA-512", "us,er=", "pencil")
    server = ScramServer(SCRAM_SHA_512, {"us,er=": credential}.get)
    server_first = server.evaluate(client.first())
    assert b",i=8192" in server_first
    assert server.evaluate(client.final(server_first)) == \
        b"v=" + base64.b64encode(client.server_signature)
    assert server.authorization_id == "us,er="


def _server(mech=SCRAM_SHA_256, iterations=4096):
    return ScramServer(mech, {"alice": make_credential(mech, "pw", iterations)}.get)


@pytest.mark.parametrize("message,error", [
    (b"n,,n=alice,r=abc,tokenauth=true", SaslError),  # no token store: an unknown token
    (b"y,,n=alice,r=abc", SaslError),  # channel binding flag other than "n"
    (b"n,,n=al=ice,r=abc", SaslError),  # bad saslname escape
    (b"n,a=bob,n=alice,r=abc", SaslAuthenticationError),  # authzid other than the user
    (b"n,,n=nobody,r=abc", SaslError),
])
def test_scram_first_message_refused(message, error):
    server = _server()
    with pytest.raises(error):
        server.evaluate(message)
    assert server.state == "failed"


def test_scram_unknown_extensions_are_ignored():
    assert _server().evaluate(b"n,,n=alice,r=abc,foo=bar").startswith(b"r=abc")


def test_scram_final_with_another_nonce_fails():
    server = _server()
    server.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(SaslError, match="Invalid client nonce"):
        server.evaluate(b"c=biws,r=abcOTHER,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


def test_scram_credential_below_minimum_iterations_is_refused():
    server = ScramServer(SCRAM_SHA_256, {"alice": make_credential(SCRAM_SHA_256, "pw",
                                                                    1000)}.get)
    with pytest.raises(SaslError, match="Iterations 1000 is less than the minimum 4096"):
        server.evaluate(b"n,,n=alice,r=abc")


def test_credential_store_persists_atomically(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    assert store.bootstrap("SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192] "
                           "SCRAM-SHA-512=[name=bob,password=bob-secret]") == 2
    text = (tmp_path / "scram-credentials.json").read_text()
    assert "alice-secret" not in text and "bob-secret" not in text
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    # salted keys let an offline guess start: readable by the broker's user only
    assert (tmp_path / "scram-credentials.json").stat().st_mode & 0o777 == 0o600
    again = ScramCredentialStore(str(tmp_path))
    assert again.get("SCRAM-SHA-256", "alice").iterations == 8192
    assert again.get("SCRAM-SHA-512", "bob") == store.get("SCRAM-SHA-512", "bob")
    # the bootstrap applies only at first start: what was altered since stays
    again.remove("SCRAM-SHA-512", "bob")
    again.save()
    third = ScramCredentialStore(str(tmp_path))
    assert third.bootstrap("SCRAM-SHA-512=[name=bob,password=bob-secret]") == 0
    assert third.get("SCRAM-SHA-512", "bob") is None


def test_unreadable_credentials_file_is_a_config_error(tmp_path):
    (tmp_path / "scram-credentials.json").write_text('{"SCRAM-SHA-256": {"a": {"salt": 1}}}')
    with pytest.raises(ConfigError, match="cannot read the SCRAM credentials in"):
        ScramCredentialStore(str(tmp_path))


def test_bootstrap_from_a_salted_password():
    salt = base64.b64encode(b"salt").decode()
    salted = base64.b64encode(ScramClient("SCRAM-SHA-256", "a", "pw").salted_password(
        b"salt", 4096)).decode()
    store = ScramCredentialStore(None)
    store.bootstrap(f"SCRAM-SHA-256=[name=a,salt={salt},saltedpassword={salted}]")
    assert store.get("SCRAM-SHA-256", "a") == make_credential(SCRAM_SHA_256, "pw", 4096, b"salt")


@pytest.mark.parametrize("text,message", [
    ("SCRAM-SHA-1=[name=a,password=p]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-256=[password=secret]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword'"),
    ("SCRAM-SHA-256=[name=a,password=secret,iterations=100]",
     "must be between 4096 and 16384"),
    ("SCRAM-SHA-256=[name=a,pass=secret]", "Unknown SCRAM configurations: pass"),
    ("name=a,password=secret", "expected MECHANISM="),
])
def test_bootstrap_errors(text, message):
    with pytest.raises(ValueError) as exc:
        parse_bootstrap(text)
    assert message in str(exc.value) and "secret" not in str(exc.value)


# -- PLAIN


def test_plain_authzid_must_be_the_user():
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        PlainServer({"alice": "pw"}).evaluate(b"bob\0alice\0pw")
    server = PlainServer({"alice": "pw"})
    server.evaluate(b"alice\0alice\0pw")
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize("token,message", [
    (b"\0\0pw", "Authentication failed: username not specified"),
    (b"a\0b\0c\0d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
])
def test_plain_malformed(token, message):
    with pytest.raises(SaslAuthenticationError) as exc:
        PlainServer({"alice": "pw"}).evaluate(token)
    assert str(exc.value) == message


# -- OAUTHBEARER

NOW_MS = 1_700_000_000_000


class Clock:
    now = NOW_MS

    def __call__(self):
        return self.now


def _oauth(options=None, clock=None):
    return OAuthBearerServer(UnsecuredValidator(options or {}, clock or Clock()))


def _token(**claims):
    base = {"sub": "alice", "iat": NOW_MS / 1000 - 10, "exp": NOW_MS / 1000 + 3600}
    base.update(claims)
    return unsecured_jwt({k: v for k, v in base.items() if v is not None})


def test_oauthbearer_valid_token():
    server = _oauth()
    assert server.evaluate(oauth_initial_response(_token(), traceId="x")) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.lifetime_ms == NOW_MS + 3_600_000


@pytest.mark.parametrize("claims,reason", [
    ({"exp": NOW_MS / 1000}, "was on or after the Expiration Time"),
    ({"exp": None}, "No expiration time in JWT"),
    ({"iat": NOW_MS / 1000 + 60}, "was after the indicated time"),
    ({"sub": None}, "No principal name in JWT claim: sub"),
    ({"sub": 42}, "The 'sub' claim was not of type String"),
    ({"iat": NOW_MS / 1000 + 7200, "exp": NOW_MS / 1000 + 3600}, "was after the indicated time"),
])
def test_oauthbearer_invalid_token(claims, reason):
    server = _oauth()
    assert server.evaluate(oauth_initial_response(_token(**claims))) == \
        b'{"status":"invalid_token"}'
    assert reason in server.failure_reason
    with pytest.raises(SaslAuthenticationError) as exc:
        server.evaluate(b"\x01")
    assert str(exc.value) == '{"status":"invalid_token"}'


def test_oauthbearer_clock_skew_option():
    clock = Clock()
    server = _oauth({"unsecuredValidatorAllowableClockSkewMs": "5000"}, clock)
    token = _token(exp=NOW_MS / 1000 - 2)
    assert server.evaluate(oauth_initial_response(token)) == b""
    clock.now += 4000  # exp - now = -6 s: beyond the skew
    assert _oauth({"unsecuredValidatorAllowableClockSkewMs": "5000"}, clock).evaluate(
        oauth_initial_response(token)) == b'{"status":"invalid_token"}'


def test_oauthbearer_required_scope_and_principal_claim():
    options = {"unsecuredValidatorRequiredScope": "read write",
               "unsecuredValidatorPrincipalClaimName": "client_id"}
    server = _oauth(options)
    answer = server.evaluate(oauth_initial_response(_token(client_id="app", scope="read")))
    assert json.loads(answer) == {"status": "insufficient_scope", "scope": "[read, write]"}
    assert answer == b'{"status":"insufficient_scope", "scope":"[read, write]"}'
    server = _oauth(options)
    assert server.evaluate(oauth_initial_response(
        _token(client_id="app", scope=["read", "write"]))) == b""
    assert server.authorization_id == "app"


@pytest.mark.parametrize("token", [
    base64.urlsafe_b64encode(b'{"alg":"none"}').decode().rstrip("=") + "." +
    base64.urlsafe_b64encode(b"[" * 100_000).decode().rstrip("=") + ".",  # deeply nested
    unsecured_jwt({"sub": "a", "exp": 2e9}, header={"alg": "HS256"}),
    unsecured_jwt({"sub": "a", "exp": 2e9}) + "signature",
    "not-a-jwt",
])
def test_oauthbearer_only_unsecured_tokens(token):
    assert _oauth().evaluate(oauth_initial_response(token)) == b'{"status":"invalid_token"}'


@pytest.mark.parametrize("message", [
    b"n,,\x01auth=Bearer\x01\x01",  # no token
    b"n,,\x01host=x\x01\x01",  # no auth
    b"n,,\x01auth=Basic abc\x01\x01",  # another scheme
    b"garbage",
])
def test_oauthbearer_malformed_client_message(message):
    with pytest.raises(SaslError):
        _oauth().evaluate(message)


def test_oauthbearer_authzid_must_be_the_principal():
    with pytest.raises(SaslAuthenticationError, match=r"authorization id \(bob\) that is "
                                                     r"different from the token's principal "
                                                     r"name \(alice\)"):
        _oauth().evaluate(oauth_initial_response(_token(), authzid="bob"))


# -- settings


def _config(**settings):
    return BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **settings})


def test_gssapi_default_is_refused_with_what_to_set():
    with pytest.raises(ConfigError, match="GSSAPI .* is not supported: set "
                                          "sasl.enabled.mechanisms"):
        _config()


def test_plain_needs_its_users():
    with pytest.raises(ConfigError) as exc:
        _config(**{"sasl.enabled.mechanisms": "PLAIN"})
    assert str(exc.value).startswith(
        "SASL/PLAIN on listener SASL_PLAINTEXT needs org.apache.kafka.common.security.plain."
        "PlainLoginModule with its user_<name>=\"<password>\" options in listener.name."
        "sasl_plaintext.plain.sasl.jaas.config or a JAAS file")


JAAS_FILE = """
// as Kafka's docs show a broker's JAAS file
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret"
    user_admin="admin-secret" user_carol="carol-secret";
    org.apache.kafka.common.security.scram.ScramLoginModule required;
};
sasl_plaintext.KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required user_dave="dave-secret";
};
Client { org.apache.zookeeper.Whatever required; };
"""


def test_jaas_file_sections():
    sections = parse_jaas_file(JAAS_FILE)
    assert list(sections) == ["KafkaServer", "sasl_plaintext.KafkaServer", "Client"]
    assert [e.login_module.rsplit(".", 1)[1] for e in sections["KafkaServer"]] == [
        "PlainLoginModule", "ScramLoginModule"]
    assert sections["KafkaServer"][0].options["user_carol"] == "carol-secret"
    with pytest.raises(JaasError, match="section KafkaServer is not closed"):
        parse_jaas_file("KafkaServer { a.B required;")


def test_jaas_file_from_kafka_opts_listener_section_first(tmp_path):
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(JAAS_FILE)
    values = read_environment({"KAFKA_OPTS": f"-Xmx1g -Djava.security.auth.login.config={path}",
                               "KAFKA_SASL_ENABLED_MECHANISMS": "PLAIN"})
    assert values["java.security.auth.login.config"] == str(path)
    listener = SaslListener(_config(**values), "SASL_PLAINTEXT", None, Clock())
    assert listener.plain_users == {"dave": "dave-secret"}  # sasl_plaintext.KafkaServer
    config = BrokerConfig({"listeners": "OTHER://127.0.0.1:0",
                           "listener.security.protocol.map": "OTHER:SASL_PLAINTEXT", **values})
    listener = SaslListener(config, "OTHER", None, Clock())
    assert listener.plain_users == {"admin": "admin-secret", "carol": "carol-secret"}


def test_jaas_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the JAAS file"):
        _config(**{"sasl.enabled.mechanisms": "PLAIN",
                   "java.security.auth.login.config": str(tmp_path / "missing.conf")})
    path = tmp_path / "other.conf"
    path.write_text("Client { a.B required; };")
    with pytest.raises(ConfigError, match="Could not find a 'KafkaServer' or "
                                          "'sasl_plaintext.KafkaServer' entry"):
        _config(**{"sasl.enabled.mechanisms": "PLAIN",
                   "java.security.auth.login.config": str(path)})


def test_per_listener_settings_and_global_fallback():
    config = _config(**listener_settings(mechanisms="PLAIN"),
                     **{"listener.name.sasl_plaintext.sasl.server.max.receive.size": 4096,
                        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": 5000})
    assert config.listener_get("SASL_PLAINTEXT", "sasl.enabled.mechanisms") == ("PLAIN",)
    assert config.listener_get("SASL_PLAINTEXT", "sasl.server.max.receive.size") == 4096
    assert config.listener_get("SASL_PLAINTEXT", "connections.max.reauth.ms", "PLAIN") == 5000
    assert config.listener_get("SASL_PLAINTEXT", "connections.max.reauth.ms", "OAUTHBEARER") == 0
    config = _config(**listener_settings(mechanisms="PLAIN,OAUTHBEARER"),
                     **{"listener.name.sasl_plaintext.connections.max.reauth.ms": 9000,
                        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": 5000})
    assert config.listener_get("SASL_PLAINTEXT", "connections.max.reauth.ms", "PLAIN") == 5000
    assert config.listener_get("SASL_PLAINTEXT", "connections.max.reauth.ms",
                               "OAUTHBEARER") == 9000
    # the broker-wide sasl.jaas.config serves a listener without its own
    _config(**{"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN_JAAS})


def test_unknown_per_listener_setting_is_refused():
    with pytest.raises(ConfigError, match="unknown setting"):
        _config(**{"listener.name.sasl_plaintext.plain.sasl.no.such": "x"})


def test_bad_secret_settings_never_repeat_the_value():
    with pytest.raises(ConfigError) as exc:
        _config(**{"sasl.enabled.mechanisms": "PLAIN",
                   "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                       'a.B required user_a="hunter2"'})
    assert "hunter2" not in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        _config(**{"sasl.enabled.mechanisms": "SCRAM-SHA-256",
                   "sasl.scram.bootstrap.credentials": "SCRAM-SHA-256=[name=a,password=hunter2,"
                                                       "iterations=1]"})
    assert "hunter2" not in str(exc.value)


def test_container_environment_names():
    env = {"KAFKA_LISTENER_NAME_SASL__PLAINTEXT_PLAIN_SASL_JAAS_CONFIG": PLAIN_JAAS,
           "KAFKA_LISTENER_NAME_SASL__PLAINTEXT_SCRAM___SHA___256_CONNECTIONS_MAX_REAUTH_MS": "7",
           "KAFKA_SASL_ENABLED_MECHANISMS": "PLAIN,SCRAM-SHA-256",
           "KAFKA_SASL_SCRAM_BOOTSTRAP_CREDENTIALS": "SCRAM-SHA-256=[name=a,password=b]"}
    values = read_environment(env)
    assert values["listener.name.sasl_plaintext.plain.sasl.jaas.config"] == PLAIN_JAAS
    assert values["listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms"] == "7"
    config = _config(**values)
    assert config.listener_get("SASL_PLAINTEXT", "connections.max.reauth.ms",
                               "SCRAM-SHA-256") == 7
