"""Delegation tokens (KIP-48): a client logged in with its own credentials asks for a token, hands
it to a job, and the job logs in over SCRAM with the token instead (the ``tokenauth`` extension).

Kafka answers each token API in two places, and the order of the checks is theirs:

- the broker (KafkaApis): a connection that could not carry a token (PLAINTEXT, SSL without a
  client certificate, or a login made with a token) gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
  a token for another owner needs CREATE_TOKENS on that user (DELEGATION_TOKEN_AUTHORIZATION_FAILED);
  a renewer that is not a ``User`` is INVALID_PRINCIPAL_TYPE; DescribeDelegationToken is answered
  here, from the broker's token cache;
- the controller (DelegationTokenControlManager): without ``delegation.token.secret.key`` every
  create, renew and expire is DELEGATION_TOKEN_AUTH_DISABLED; otherwise it keeps the tokens.

A token's HMAC is HmacSHA512 of its id under the secret key; the job's SCRAM password is that
HMAC in base64, and its credentials are made at 4096 iterations for both SCRAM mechanisms, as
Kafka's token cache makes them. Tokens are kept without their HMAC (as Kafka's
DelegationTokenRecord), in ``<data dir>/delegation-tokens.json``, and the HMAC is computed again
at start: a changed secret key makes every earlier token useless, as on Kafka. Expired tokens go
at the first use after each ``delegation.token.expiry.check.interval.ms``, when Kafka's
controller sweeps them.
"""
from __future__ import annotations

import base64
import hashlib
import hmac as hmac_lib
import json
import os
import uuid
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from ..errors import ConfigError
from ..log.files import write_json
from . import ANONYMOUS, KafkaPrincipal
from .authorizer import AclOperation, ResourceType

#: the timestamps of an answer refused by the broker itself (Kafka's
#: DelegationTokenManager.ErrorTimestamp); Kafka's controller, which answers
#: DELEGATION_TOKEN_AUTH_DISABLED, leaves them 0
ERROR_TIMESTAMP = -1
TOKENS_FILE = "delegation-tokens.json"
USER_TYPE = "User"
#: Kafka's ScramMechanism.minIterations, with which its token cache makes a token's credentials
TOKEN_ITERATIONS = 4096


def timestamp(error: ErrorCode) -> int:
    """The timestamps that go with a refusal, as the part of Kafka that refuses sets them."""
    return 0 if error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED else ERROR_TIMESTAMP


def requests_allowed(ctx) -> bool:
    """Kafka's allowTokenRequests: only a connection authenticated other than by a token may
    ask for one."""
    conn = ctx.conn
    protocol = conn.security_protocol
    if getattr(conn, "token_authenticated", False) or protocol == "PLAINTEXT":
        return False
    if protocol == "SSL" and conn.principal == ANONYMOUS:
        return False
    return True


def kafka_uuid() -> str:
    """A random id as Kafka's Uuid.toString writes it: url-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass
class TokenInformation:
    """Kafka's TokenInformation, with the HMAC this broker computed for it."""
    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: list[KafkaPrincipal]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int
    hmac: bytes = b""
    #: SCRAM mechanism name -> the credential the token's holder logs in with
    credentials: dict = field(default_factory=dict, repr=False)

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Who may see the token without an ACL (TokenInformation.ownerOrRenewer)."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def may_renew(self, principal: KafkaPrincipal) -> bool:
        """Who may renew or expire it (DelegationTokenControlManager.allowedToRenew): the owner
        and the renewers, not the requester."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now: int) -> bool:
        return self.max_timestamp < now or self.expiry_timestamp < now

    def to_json(self) -> dict:
        return {"token_id": self.token_id, "owner": str(self.owner),
                "requester": str(self.requester), "renewers": [str(r) for r in self.renewers],
                "issue_timestamp": self.issue_timestamp, "max_timestamp": self.max_timestamp,
                "expiry_timestamp": self.expiry_timestamp}


class DelegationTokens:
    """The cluster's delegation tokens: create, renew, expire, describe, and what a token login
    needs. ``clock()`` is the broker's wall clock in milliseconds."""

    def __init__(self, config, clock) -> None:
        self.secret_key: str | None = config["delegation.token.secret.key"] or None
        self.max_lifetime_ms = config["delegation.token.max.lifetime.ms"]
        self.expiry_time_ms = config["delegation.token.expiry.time.ms"]
        self.check_interval_ms = config["delegation.token.expiry.check.interval.ms"]
        self.clock = clock
        data_dir = config["log.dirs"]
        self.path = os.path.join(data_dir, TOKENS_FILE) if data_dir else None
        self.tokens: dict[str, TokenInformation] = {}
        self.by_hmac: dict[bytes, str] = {}
        self.next_sweep = clock() + self.check_interval_ms
        if self.enabled and self.path and os.path.exists(self.path):
            self._load()

    @property
    def enabled(self) -> bool:
        return self.secret_key is not None

    # -- the APIs (after the broker's own checks, see create_refusal and refusal)

    def create(self, owner: KafkaPrincipal, requester: KafkaPrincipal,
               renewers: list[KafkaPrincipal], max_lifetime_ms: int
               ) -> tuple[ErrorCode, TokenInformation | None]:
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None
        now = self.clock()
        lifetime = self.max_lifetime_ms
        if max_lifetime_ms > 0:
            lifetime = min(lifetime, max_lifetime_ms)
        max_ts = now + lifetime
        token = TokenInformation(kafka_uuid(), owner, requester, list(renewers), now, max_ts,
                                 min(max_ts, now + self.expiry_time_ms))
        self._add(token)
        self.save()
        return ErrorCode.NONE, token

    def renew(self, principal: KafkaPrincipal, hmac: bytes, period_ms: int
              ) -> tuple[ErrorCode, int]:
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0
        self.sweep()
        token = self._by_hmac(hmac)
        if token is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, 0
        now = self.clock()
        if token.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, 0
        if not token.may_renew(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, 0
        period = self.expiry_time_ms
        if period_ms > 0:
            period = min(period, period_ms)
        token.expiry_timestamp = min(token.max_timestamp, now + period)
        self.save()
        return ErrorCode.NONE, token.expiry_timestamp

    def expire(self, principal: KafkaPrincipal, hmac: bytes, period_ms: int
               ) -> tuple[ErrorCode, int]:
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0
        self.sweep()
        token = self._by_hmac(hmac)
        if token is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, 0
        if not token.may_renew(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, 0
        now = self.clock()
        if period_ms < 0:  # at once
            self._remove(token.token_id)
            self.save()
            return ErrorCode.NONE, now
        if token.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, 0
        token.expiry_timestamp = min(token.max_timestamp, now + period_ms)
        self.save()
        return ErrorCode.NONE, token.expiry_timestamp

    def describe(self, eligible) -> list[TokenInformation]:
        self.sweep()
        return [t for t in self.tokens.values() if eligible(t)]

    # -- a token login (SCRAM with tokenauth=true)

    def login(self, mechanism: str, token_id: str):
        """(credential, owner name, expiry timestamp) of a live token, or None."""
        self.sweep()
        token = self.tokens.get(token_id)
        if token is None:
            return None
        return token.credentials.get(mechanism), token.owner.name, token.expiry_timestamp

    # -- upkeep

    def sweep(self) -> None:
        """Kafka's controller removes expired tokens every check interval; here that happens
        at the first use after it."""
        now = self.clock()
        if now < self.next_sweep:
            return
        self.next_sweep = now + self.check_interval_ms
        gone = [t.token_id for t in self.tokens.values() if t.expired(now)]
        for token_id in gone:
            self._remove(token_id)
        if gone:
            self.save()

    def _by_hmac(self, hmac: bytes) -> TokenInformation | None:
        token_id = self.by_hmac.get(bytes(hmac))
        return None if token_id is None else self.tokens.get(token_id)

    def _add(self, token: TokenInformation) -> None:
        from .scram import MECHANISMS, make_credential  # noqa: PLC0415 - only with tokens on
        token.hmac = hmac_lib.new(self.secret_key.encode(), token.token_id.encode(),
                                  hashlib.sha512).digest()
        password = base64.b64encode(token.hmac).decode()
        token.credentials = {name: make_credential(mech, password, TOKEN_ITERATIONS)
                             for name, mech in MECHANISMS.items()}
        self.tokens[token.token_id] = token
        self.by_hmac[token.hmac] = token.token_id

    def _remove(self, token_id: str) -> None:
        token = self.tokens.pop(token_id, None)
        if token is not None:
            self.by_hmac.pop(token.hmac, None)

    def save(self) -> None:
        if not self.path:
            return
        data = {"version": 1, "tokens": [t.to_json() for t in self.tokens.values()]}
        write_json(self.path, data, indent=1)   # no HMAC: they come from the secret key

    def _load(self) -> None:
        try:
            with open(self.path) as f:
                data = json.load(f)
            for t in data["tokens"]:
                self._add(TokenInformation(
                    t["token_id"], KafkaPrincipal.parse(t["owner"]),
                    KafkaPrincipal.parse(t["requester"]),
                    [KafkaPrincipal.parse(r) for r in t["renewers"]], int(t["issue_timestamp"]),
                    int(t["max_timestamp"]), int(t["expiry_timestamp"])))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"cannot read the delegation tokens in {self.path}: "
                              f"{type(exc).__name__}") from None


def refusal(ctx) -> ErrorCode:
    """The broker's own reason to refuse a renew, expire or describe (NONE: go on)."""
    if not requests_allowed(ctx):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    return ErrorCode.NONE


def create_refusal(broker, ctx, owner: KafkaPrincipal,
                   renewers: list[KafkaPrincipal]) -> ErrorCode:
    """The broker's own reason to refuse a CreateDelegationToken for ``owner`` (NONE: go on)."""
    if not requests_allowed(ctx):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    auth = broker.authorizer
    if owner != ctx.conn.principal and auth is not None and not auth.predicate(
            ctx, AclOperation.CREATE_TOKENS, ResourceType.USER)(str(owner)):
        return ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    if any(r.principal_type != USER_TYPE for r in renewers):
        return ErrorCode.INVALID_PRINCIPAL_TYPE
    return ErrorCode.NONE


def describable(broker, ctx, owners: list[KafkaPrincipal] | None):
    """Which tokens a DescribeDelegationToken shows (Kafka's DelegationTokenManager.filterToken):
    those of the owners asked for (all for None), and of those the requester's own (as owner,
    requester or renewer), or any with DESCRIBE on the token or DESCRIBE_TOKENS on its owner."""
    me = ctx.conn.principal
    auth = broker.authorizer

    def eligible(token: TokenInformation) -> bool:
        if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
            return False
        if token.owner_or_renewer(me) or auth is None:
            return True
        return (auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN)(
                    token.token_id)
                or auth.predicate(ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER)(
                    str(token.owner)))

    return eligible
