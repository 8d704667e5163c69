"""Bad input on an SSL listener of a kbroker process: a client that never finishes its TLS
handshake (nothing sent, or half a ClientHello) is closed when connections.max.idle.ms ends,
with one log line each; connections waiting in a handshake count against
max.connections.per.ip and give their slot back when closed; an idle TLS connection expires like
a plaintext one."""
from __future__ import annotations

import socket
import ssl
import time

import pytest

from tests.support import wait_until

from .conftest import SslBroker

IDLE_MS = 1000


@pytest.fixture(scope="module")
def strict_broker(certs):
    broker = SslBroker(certs, **{"connections.max.idle.ms": IDLE_MS,
                                 "max.connections.per.ip": 3})
    broker.start()
    yield broker
    broker.stop()


def client_hello_start(certs, port: int) -> bytes:
    """The first bytes a real TLS client sends (its ClientHello), captured from a local
    socket pair."""
    ctx = ssl.create_default_context(cafile=certs["paths"]["ca.crt"])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the broker closes ``sock`` within ``seconds`` (what it still sends is read)."""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            if sock.recv(65536) == b"":
                return True
    except (ConnectionResetError, ssl.SSLEOFError):
        return True
    except socket.timeout:
        pass
    return False


def tls_api_versions(certs, port: int) -> socket.socket:
    ctx = ssl.create_default_context(cafile=certs["paths"]["ca.crt"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                           server_hostname="localhost")
    request = bytes.fromhex("0012000000000001") + b"\x00\x04test"
    sock.sendall(len(request).to_bytes(4, "big") + request)
    assert len(sock.recv(4)) == 4
    return sock


def test_stalled_handshakes_are_closed_and_counted(strict_broker, certs):
    # the start-up probe's connection (closed by the client just before) must have been seen
    # closed by the broker: the quota counts every connection from 127.0.0.1
    time.sleep(0.2)
    before = strict_broker.logs().count("TLS handshake did not finish in time")
    hello = client_hello_start(certs, strict_broker.ssl_port)
    silent = socket.create_connection(("127.0.0.1", strict_broker.ssl_port))
    half = socket.create_connection(("127.0.0.1", strict_broker.ssl_port))
    half.sendall(hello[:len(hello) // 2])
    third = socket.create_connection(("127.0.0.1", strict_broker.ssl_port))
    # a fourth from the same address is over max.connections.per.ip: closed at once, unread
    fourth = socket.create_connection(("127.0.0.1", strict_broker.ssl_port))
    started = time.monotonic()
    assert closed_within(fourth, 5)
    assert time.monotonic() - started < IDLE_MS / 1000
    # the three in their handshakes are closed once connections.max.idle.ms has passed
    for sock in (silent, half, third):
        assert closed_within(sock, 10)
        sock.close()
    fourth.close()
    assert time.monotonic() - started >= IDLE_MS / 1000 * 0.9
    wait_until(lambda: strict_broker.logs().count("TLS handshake did not finish in time")
               == before + 3, 5, message="one line per stalled handshake")
    # their slots were given back: three TLS clients connect again
    clients = [tls_api_versions(certs, strict_broker.ssl_port) for _ in range(3)]
    # and an established TLS connection left idle expires as a plaintext one does
    for sock in clients:
        assert closed_within(sock, 10)
        sock.close()


def test_garbage_closes_only_its_connection(strict_broker, certs):
    good = tls_api_versions(certs, strict_broker.ssl_port)
    before = strict_broker.logs().count("TLS handshake failed")
    bad = socket.create_connection(("127.0.0.1", strict_broker.ssl_port))
    bad.sendall(b"\x16\x03\x01\x00\x05hello" + bytes(range(256)) * 4)
    assert closed_within(bad, 5)
    bad.close()
    wait_until(lambda: strict_broker.logs().count("TLS handshake failed") == before + 1, 5,
               message="one line for the garbage")
    # the good connection still answers
    request = bytes.fromhex("0012000000000002") + b"\x00\x04test"
    good.sendall(len(request).to_bytes(4, "big") + request)
    assert len(good.recv(4)) == 4
    good.close()


def test_garbage_inside_the_tls_stream(strict_broker, certs):
    """After the handshake, bytes that are no TLS record of this session: the connection is
    closed with one line naming the TLS error."""
    import os
    sock = tls_api_versions(certs, strict_broker.ssl_port)
    before = strict_broker.logs().count("TLS error")
    raw = socket.socket(fileno=os.dup(sock.fileno()))
    raw.sendall(b"\x17\x03\x03\x00\x40" + bytes(64))  # application data that does not decrypt
    assert closed_within(raw, 5)
    raw.close()
    sock.close()
    wait_until(lambda: strict_broker.logs().count("TLS error") == before + 1, 5,
               message="one line for the bad record")
