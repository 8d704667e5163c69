"""SaslHandshake: the mechanism a client will authenticate with (broker/security/sasl.py).

On a connection that is not authenticating (a PLAINTEXT listener, or already authenticated
without a session to renew) Kafka answers ILLEGAL_SASL_STATE, as here."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import SaslHandshakeResponse

NAME = "SaslHandshake"


def handle(broker, ctx, request, respond) -> None:
    auth = ctx.conn.authenticator
    if auth is None or not auth.in_handshake():
        respond(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]))
        return
    respond(auth.handshake(request.mechanism, ctx.api_version))
