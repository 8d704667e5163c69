"""The two ways a SASL exchange fails, as Kafka's SaslServers fail.

SaslAuthenticationError: its message is meant for the client (Kafka's
SaslAuthenticationException), e.g. "Authentication failed: Invalid username or password".
SaslError: the client gets only Kafka's generic "Authentication failed during authentication due
to invalid credentials with SASL mechanism ..." (Kafka's javax SaslException), because the detail
could tell an unauthenticated client whether a user exists. Neither ever holds a secret.
"""
from __future__ import annotations


class SaslAuthenticationError(Exception):
    """Authentication failed; the message goes to the client."""


class SaslError(Exception):
    """Authentication failed; the client gets Kafka's generic message, the log the detail."""
