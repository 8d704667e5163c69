"""SaslAuthenticate: one token of the SASL exchange a SaslHandshake v1 began
(broker/security/sasl.py); after authentication Kafka answers ILLEGAL_SASL_STATE, as here."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import SaslAuthenticateResponse

NAME = "SaslAuthenticate"


def handle(broker, ctx, request, respond) -> None:
    auth = ctx.conn.authenticator
    if auth is None or not auth.authenticating():
        respond(SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b""))
        return
    respond(auth.authenticate(request.auth_bytes, ctx.api_version))
