"""Password guessing over real sockets: a failed authentication is answered only after
connection.failed.authentication.delay.ms, as Kafka holds its failure response until the delayed
close, so one connection learns of a wrong guess no sooner than that, for every mechanism. A
successful login is not delayed. A broker process with a 400 ms delay; the bounds asserted are
lower bounds (the answer cannot come early), so a slow machine cannot fail them."""
from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode
from tests.support import BrokerProcess, RawClient, free_port

from .sasl_support import (ALICE_PASSWORD, ScramClient, authenticate, closed_by_peer, handshake,
                           kbroker_overrides, oauth_initial_response, plain_token, unsecured_jwt)

DELAY_MS = 400


@pytest.fixture(scope="module")
def broker():
    port = free_port()
    proc = BrokerProcess(port=port, overrides=kbroker_overrides(
        port, **{"connection.failed.authentication.delay.ms": DELAY_MS}))
    proc.start()
    yield proc
    proc.stop()


def _timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def _plain_guess(client, password):
    assert handshake(client, "PLAIN").error_code == 0
    return _timed(lambda: authenticate(client, plain_token("alice", password)))


def _scram_guess(client, password):
    assert handshake(client, "SCRAM-SHA-256").error_code == 0
    scram = ScramClient("SCRAM-SHA-256", "alice", password)
    first = authenticate(client, scram.first())
    assert first.error_code == 0
    return _timed(lambda: authenticate(client, scram.final(first.auth_bytes)))


def _oauth_guess(client, subject):
    now = int(time.time())
    token = unsecured_jwt({"sub": subject, "iat": now, "exp": now - 60})  # expired
    assert handshake(client, "OAUTHBEARER").error_code == 0
    challenge = authenticate(client, oauth_initial_response(token))
    assert challenge.error_code == 0 and b"invalid_token" in challenge.auth_bytes
    return _timed(lambda: authenticate(client, b"\x01"))


@pytest.mark.parametrize("guess", [_plain_guess, _scram_guess, _oauth_guess],
                         ids=["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"])
def test_a_wrong_guess_is_answered_after_the_delay_then_closed(broker, guess):
    client = RawClient(broker.port)
    try:
        response, waited = guess(client, "a-wrong-guess")
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert waited >= DELAY_MS / 1000
        assert closed_by_peer(client, timeout=5)
    finally:
        client.close()


def test_an_unsupported_mechanism_is_answered_after_the_delay(broker):
    client = RawClient(broker.port)
    try:
        response, waited = _timed(lambda: handshake(client, "GSSAPI"))
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert waited >= DELAY_MS / 1000
        assert closed_by_peer(client, timeout=5)
    finally:
        client.close()


def test_one_thread_guessing_is_held_to_one_guess_per_delay(broker):
    """The attack: one thread guessing passwords as fast as the broker answers. Five guesses
    take at least five delays; none of them gets through."""
    started = time.monotonic()
    for i in range(5):
        client = RawClient(broker.port)
        try:
            response, _ = _plain_guess(client, f"guess-{i}")
            assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        finally:
            client.close()
    assert time.monotonic() - started >= 5 * DELAY_MS / 1000


def test_the_right_password_is_not_delayed(broker):
    client = RawClient(broker.port)
    try:
        response, waited = _plain_guess(client, ALICE_PASSWORD)
        assert response.error_code == 0
        assert waited < DELAY_MS / 1000
        assert not closed_by_peer(client, timeout=0.1)
    finally:
        client.close()
