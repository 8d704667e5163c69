"""One clear line for every failure of a client command: a CliError says what went wrong in the
user's words; a Kafka error from the client library is named by Kafka's error name
(UNKNOWN_TOPIC_OR_PARTITION) with what it was doing; the client library's own log records are
kept (not printed) so a failed bootstrap can say why it failed."""
from __future__ import annotations

import logging


class CliError(Exception):
    """A failure to report as ``kbroker: <message>`` with exit status ``status``."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


class ClientLog(logging.Handler):
    """Keeps the client library's warnings and errors instead of printing them: a failed
    bootstrap is explained by the exceptions they carry (connection refused, authentication
    failed, certificate not trusted)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        #: connection managers of the clients made (broker/cli/connection.py), closed on a
        #: fatal failure: kafka-python retries a failed login or TLS handshake until its
        #: bootstrap timeout, yet a wrong password or an untrusted certificate does not get
        #: better by retrying
        self.managers: list = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < 200:
            self.records.append(record)
        if any(_fatal(exc) for exc in _exceptions(record)):
            for manager in self.managers:
                manager.call_soon(manager.close)

    def reason(self) -> str | None:
        """The most telling failure seen: a fatal one above all, else the last one."""
        seen = [exc for record in self.records for exc in _exceptions(record)]
        fatal = [exc for exc in seen if _fatal(exc)]
        if fatal:
            exc = fatal[-1]
            kind = "authentication failed" if _authentication(exc) else "TLS handshake failed"
            return f"{kind}: {_short(exc)}"
        others = [exc for exc in seen if "Timeout" not in type(exc).__name__]
        return _short(others[-1]) if others else None


def _exceptions(record: logging.LogRecord) -> list[BaseException]:
    args = record.args if isinstance(record.args, tuple) else ()
    return [arg for arg in args if isinstance(arg, BaseException)]


def _authentication(exc: BaseException) -> bool:
    return "Authentication" in type(exc).__name__


def _fatal(exc: BaseException) -> bool:
    """A failed SASL login or TLS handshake: retrying cannot mend either."""
    import ssl
    text = str(exc)
    return _authentication(exc) or isinstance(exc, ssl.SSLError) or \
        "Handshake failed" in text or "[SSL: " in text


CLIENT_LOG = ClientLog()


def quiet_client_logs(verbose: bool) -> None:
    """kafka-python and its background threads log to the 'kafka' logger: keep those records
    for error messages, and print them only with --verbose."""
    logger = logging.getLogger("kafka")
    logger.addHandler(CLIENT_LOG)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = verbose
    if verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
        return
    import threading

    def keep(hook_args) -> None:
        """An exception ending one of the client's threads: kept like its log records (the
        command reports what it caused on one line), printed only with --verbose."""
        CLIENT_LOG.emit(logging.LogRecord("kafka.thread", logging.ERROR, __file__, 0,
                                          "thread %s died: %s",
                                          (getattr(hook_args.thread, "name", "?"),
                                           hook_args.exc_value), None))
    threading.excepthook = keep


def _short(exc: BaseException) -> str:
    """The first line of the exception's text without kafka-python's '[Error 58]
    SaslAuthenticationFailedError: ' prefixes, led by Kafka's error name when it has one."""
    import re
    text = (str(exc) or type(exc).__name__).splitlines()[0]
    text = re.sub(r"^(\[Error -?\d+\]\s*|\w+Error:\s*)+", "", text) or type(exc).__name__
    name = getattr(exc, "message", None)
    return f"{name}: {text}" if isinstance(name, str) and name not in text else text


def describe(exc: BaseException, bootstrap: str, protocol: str | None = None) -> str:
    """The one line that reports ``exc``; ``protocol`` is the security.protocol used."""
    import kafka.errors as errors
    if isinstance(exc, errors.KafkaTimeoutError) and "bootstrap" in str(exc).lower():
        reason = CLIENT_LOG.reason()
        if reason and reason.startswith("authentication failed"):
            return reason  # the address was right
        hint = ""
        if reason and "disconnected" in reason and protocol == "PLAINTEXT":
            hint = (" (a TLS or SASL listener closes a plain connection: give its settings "
                    "with --command-config)")
        return f"could not connect to {bootstrap}" + (f": {reason}" if reason else "") + hint
    if "Authentication" in type(exc).__name__:
        return f"authentication failed: {_short(exc)}"
    if isinstance(exc, errors.BrokerResponseError):
        detail = str(exc.args[0]) if exc.args and exc.args[0] else exc.description
        return f"{exc.message}: {detail.splitlines()[0]}"
    if isinstance(exc, errors.NoBrokersAvailable):
        return f"no broker available at {bootstrap}"
    if isinstance(exc, errors.KafkaError):
        return _short(exc)
    return f"{type(exc).__name__}: {_short(exc)}"
