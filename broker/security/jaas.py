"""Kafka's JAAS configuration syntax, as its ``sasl.jaas.config`` settings hold it.

    <loginModuleClass> <controlFlag> (<optionName>=<optionValue>)*;

Tokens as Kafka's JaasConfig reads them with java.io.StreamTokenizer: words of letters, digits,
``.``, ``-``, ``_`` and ``$``; values quoted with ``"`` or ``'`` (backslash escapes inside);
``//`` and ``/* */`` comments; every entry ends with a semicolon. Option values are secrets
(``password``, ``user_<name>``): errors name the option, never its value.
"""
from __future__ import annotations

from typing import NamedTuple

CONTROL_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}


class JaasError(ValueError):
    """A sasl.jaas.config value that Kafka would refuse."""


class LoginModuleEntry(NamedTuple):
    login_module: str
    control_flag: str
    options: dict


def _is_word_start(c: str) -> bool:
    return c.isalpha() or c in "-_$" or ord(c) >= 160


def _is_word_char(c: str) -> bool:
    return _is_word_start(c) or c.isdigit() or c == "."


def _tokens(text: str):
    """(kind, value) pairs: ("word", s), ("quoted", s), ("number", None) or ("char", c)."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # "//" and, as StreamTokenizer's comment character, a lone "/"
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
        elif c in "\"'":
            out = []
            i += 1
            while i < n and text[i] != c and text[i] != "\n":
                ch = text[i]
                if ch == "\\" and i + 1 < n:
                    i += 1
                    esc = text[i]
                    if esc in "01234567":
                        digits = esc
                        while len(digits) < 3 and i + 1 < n and text[i + 1] in "01234567":
                            i += 1
                            digits += text[i]
                        out.append(chr(int(digits, 8) & 0xFF))
                    else:
                        out.append(_ESCAPES.get(esc, esc))
                else:
                    out.append(ch)
                i += 1
            i += 1  # the closing quote (an unterminated value ends at the line's end)
            yield "quoted", "".join(out)
        elif _is_word_start(c):
            start = i
            while i < n and _is_word_char(text[i]):
                i += 1
            yield "word", text[start:i]
        elif c.isdigit() or c == ".":
            while i < n and (text[i].isdigit() or text[i] == "."):
                i += 1
            yield "number", None
        else:
            i += 1
            yield "char", c


def parse_jaas_config(text: str) -> list[LoginModuleEntry]:
    """Every login module entry of a sasl.jaas.config value, in order."""
    tokens = list(_tokens(text))
    entries, i = _entries(tokens, 0, None)
    if i < len(tokens):
        raise JaasError("JAAS config entry does not start with a login module class name")
    if not entries:
        raise JaasError("Login module not specified in JAAS config")
    return entries


def parse_jaas_file(text: str) -> dict[str, list[LoginModuleEntry]]:
    """A JAAS configuration file (the JVM's ``java.security.auth.login.config``), as Kafka
    brokers read it: ``Name { <entry>; <entry>; };`` sections, e.g. ``KafkaServer`` or
    ``sasl_plaintext.KafkaServer`` -> their login module entries."""
    tokens = list(_tokens(text))
    sections: dict[str, list[LoginModuleEntry]] = {}
    i = 0
    while i < len(tokens):
        kind, name = tokens[i]
        if kind not in ("word", "quoted") or tokens[i + 1:i + 2] != [("char", "{")]:
            raise JaasError("JAAS file: expected a section, Name { ... };")
        entries, i = _entries(tokens, i + 2, "}")
        if tokens[i:i + 1] != [("char", "}")]:
            raise JaasError(f"JAAS file: section {name} is not closed by }}")
        i += 1
        if tokens[i:i + 1] == [("char", ";")]:
            i += 1
        if not entries:
            raise JaasError(f"JAAS file: section {name} has no login module")
        sections[name] = entries
    return sections


def _entries(tokens: list, i: int, end: str | None) -> tuple[list[LoginModuleEntry], int]:
    """Login module entries from ``tokens[i]`` up to the ``end`` character (or the end)."""
    entries: list[LoginModuleEntry] = []
    while i < len(tokens) and (end is None or tokens[i] != ("char", end)):
        kind, module = tokens[i]
        if kind not in ("word", "quoted"):
            raise JaasError("JAAS config entry does not start with a login module class name")
        i += 1
        if i >= len(tokens):
            raise JaasError("Login module control flag not specified in JAAS config")
        kind, flag = tokens[i]
        if kind not in ("word", "quoted") or flag.upper() not in CONTROL_FLAGS:
            raise JaasError(f"Invalid login module control flag '{flag or ''}' in JAAS config")
        i += 1
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("char", ";"):
            kind, key = tokens[i]
            if kind not in ("word", "quoted"):
                raise JaasError("JAAS config option name expected")
            if i + 2 >= len(tokens) or tokens[i + 1] != ("char", "=") \
                    or tokens[i + 2][0] not in ("word", "quoted"):
                raise JaasError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasError("JAAS config entry not terminated by semi-colon")
        i += 1  # the ";"
        entries.append(LoginModuleEntry(module, flag.upper(), options))
    return entries, i


def parse_single_module(text: str) -> LoginModuleEntry:
    """A broker's sasl.jaas.config: exactly one login module, as Kafka's JaasContext requires."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasError(f"JAAS config property contains {len(entries)} login modules, should be "
                        "1 module")
    return entries[0]
