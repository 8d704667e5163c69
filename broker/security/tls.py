"""TLS for SSL and SASL_SSL listeners: the ``ssl.SSLContext`` of a listener built from Kafka's
``ssl.*`` settings, and the principal of an SSL connection from its client certificate.

Kafka's DefaultSslEngineFactory reads the keystore and truststore as JKS, PKCS12 or PEM; here
PEM (files or inline, ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` /
``ssl.truststore.certificates``) and PKCS12 (through ``cryptography``) are read, and a JKS file is
refused at start with a message saying how to convert it. As on Java (``keystore.type.compat``), a
store of type JKS that is really a PKCS12 file is read as PKCS12.

Python's ``ssl`` module loads a private key only from a file, so the key and chain are written to
a private temporary file for the moment ``load_cert_chain`` reads it, the key encrypted under a
random password, and the file is removed at once.

The principal of an SSL connection is Kafka's DefaultKafkaPrincipalBuilder's: the client
certificate's subject as an RFC 2253 distinguished name (as Java's X500Principal.getName prints
it), mapped by ``ssl.principal.mapping.rules`` (SslPrincipalMapper); User:ANONYMOUS without a
client certificate.
"""
from __future__ import annotations

import asyncio
import asyncio.sslproto
import os
import re
import secrets
import ssl
import tempfile

import structlog

from broker.errors import ConfigError

from . import ANONYMOUS, TLS_PROTOCOLS, KafkaPrincipal

log = structlog.get_logger("broker.security")

#: the security protocols whose listeners speak TLS
#: a TLS record's header: content type, protocol version, length of what follows
RECORD_HEADER = 5
#: the content type of a handshake record (a ClientHello comes in one)
HANDSHAKE_RECORD = 0x16
#: the most a TLS record may hold after its header (2^14 + 2048, TLSCiphertext of RFC 5246)
MAX_RECORD = 16384 + 2048

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}
TLS_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
#: ssl.protocol names Java's SSLContext.getInstance knows and what they allow at most
PROTOCOL_MAX = {"TLS": ssl.TLSVersion.MAXIMUM_SUPPORTED, **TLS_VERSIONS}
_NO_VERSION = {ssl.TLSVersion.TLSv1: "OP_NO_TLSv1", ssl.TLSVersion.TLSv1_1: "OP_NO_TLSv1_1",
               ssl.TLSVersion.TLSv1_2: "OP_NO_TLSv1_2", ssl.TLSVersion.TLSv1_3: "OP_NO_TLSv1_3"}
STORE_TYPES = ("JKS", "PKCS12", "PEM")

#: every ssl.* setting a listener reads (each may be given per listener as
#: listener.name.<listener>.<setting>, which wins over the broker-wide one)
SSL_SETTING_NAMES = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites",
    "ssl.principal.mapping.rules", "ssl.endpoint.identification.algorithm")


class TlsConfigError(ConfigError):
    """An ssl.* setting that cannot make a working listener; the message names it."""


def listener_ssl_settings(config, listener: str) -> dict:
    """The ssl.* settings of ``listener``: ``listener.name.<listener lowercased>.ssl.x`` where
    given, else the broker-wide ``ssl.x`` (Kafka's valuesWithPrefixOverride)."""
    return {name: config.listener_get(listener, name) for name in SSL_SETTING_NAMES}


# -- ssl.principal.mapping.rules (Kafka's SslPrincipalMapper)

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No rule of ssl.principal.mapping.rules applies to a distinguished name."""


class _Rule:
    __slots__ = ("default", "pattern", "replacement", "case", "text")

    def __init__(self, text: str, pattern: str | None = None, replacement: str = "",
                 case: str = "") -> None:
        self.text = text
        self.default = pattern is None
        self.replacement = replacement
        self.case = case
        self.pattern = None
        if pattern is not None:
            try:
                self.pattern = re.compile(pattern)
            except re.error as exc:
                raise TlsConfigError(f"Invalid rule: {text} ({exc})") from None

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        pattern = self.pattern
        match = pattern.fullmatch(dn)
        if match is None:
            return None
        groups = pattern.groups
        result = pattern.sub(lambda m: _java_replacement(self.replacement, m, groups), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _java_replacement(replacement: str, match: re.Match, groups: int) -> str:
    """Java's Matcher.appendReplacement for one match: ``$n`` takes group n (more digits while
    the number stays a group, as Java reads it), ``${name}`` a named group, ``\\x`` is x."""
    out = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and replacement[i + 1] == "{":
            end = replacement.find("}", i)
            if end < 0:
                raise NoMatchingRule(f"named group reference is missing a closing brace in "
                                     f"{replacement!r}")
            out.append(match.group(replacement[i + 2:end]) or "")
            i = end + 1
        elif c == "$" and i + 1 < n and replacement[i + 1].isdigit():
            number = int(replacement[i + 1])
            i += 2
            if number > groups:
                raise NoMatchingRule(f"No group {number} in {replacement!r}")
            while i < n and replacement[i].isdigit() \
                    and number * 10 + int(replacement[i]) <= groups:
                number = number * 10 + int(replacement[i])
                i += 1
            out.append(match.group(number) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _escape_back_references(replacement: str, groups: int) -> str:
    """Kafka's escapeLiteralBackReferences: a ``$n`` naming a group the pattern does not have is
    taken literally (after trimming digits while the number is 10 or more)."""
    if groups == 0:
        return replacement
    value = replacement
    pos = 0
    while True:
        found = re.compile(r"\$(\d+)").search(value, pos)
        if found is None:
            return value
        pos = found.end()
        digits = found.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = found.start(1)
            value = value[:start - 1] + "\\" + value[start - 1:]
            pos += 1


class PrincipalMapper:
    """ssl.principal.mapping.rules: ``RULE:pattern/replacement/[LU]`` and ``DEFAULT``, comma
    separated, the first that matches the whole distinguished name wins."""

    def __init__(self, rules: str | None) -> None:
        text = "DEFAULT" if rules is None else rules
        self.rules: list[_Rule] = []
        for found in _RULE_SPLITTER.finditer(text.strip()):
            rule = found.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None:
                raise TlsConfigError(f"Invalid rule: {rule}")
            if parsed.end() != len(rule):
                raise TlsConfigError(f"Invalid rule: `{rule}`, unmatched substring: "
                                     f"`{rule[parsed.end():]}`")
            if parsed.group(1) is not None:
                self.rules.append(_Rule(rule))
            elif parsed.group(2) is not None:
                made = _Rule(rule, parsed.group(2), "", parsed.group(4))
                made.replacement = _escape_back_references(parsed.group(3),
                                                           made.pattern.groups)
                self.rules.append(made)
            elif parsed.group(5):
                # Kafka's parser ends its last alternative with an empty match, so text that is
                # no rule is left over as an unmatched substring
                raise TlsConfigError(f"Invalid rule: `{rule}`, unmatched substring: `{rule}`")
            if found.end() == len(text.strip()):
                break

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules "
                             f"[{', '.join(r.text for r in self.rules)}]")


# -- the distinguished name of a certificate, as Java's X500Principal.getName() (RFC 2253)

#: the attribute types Java prints by keyword in RFC 2253 form; others as their OID with the
#: value's DER in hex
_RFC2253_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST",
                     "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.9": "STREET",
                     "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID"}
#: DER string types Java prints as text: UTF8String, PrintableString, T61String, IA5String,
#: GeneralString, BMPString (others, and unknown keywords, are printed as #hex)
_STRING_TAGS = {0x0C: "utf-8", 0x13: "latin-1", 0x14: "latin-1", 0x16: "latin-1",
                0x1B: "latin-1", 0x1E: "utf-16-be"}
_ESCAPED = set(',=+<>#;"\\')


def _der_item(data: bytes, pos: int) -> tuple[int, int, int, int]:
    """(tag, start of content, end of content, end of item) of the DER item at ``pos``."""
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    return tag, pos, pos + length, pos + length


def _oid(content: bytes) -> str:
    first = content[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for byte in content[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(str(p) for p in parts)


def _escape_value(text: str) -> str:
    out = []
    for c in text:
        if c in _ESCAPED:
            out.append("\\" + c)
        elif c == "\x00":
            out.append("\\00")
        else:
            out.append(c)
    value = "".join(out)
    # leading and trailing spaces are escaped
    lead = len(value) - len(value.lstrip(" "))
    if lead:
        value = "\\ " * lead + value[lead:]
    trail = len(value) - len(value.rstrip(" "))
    if trail and value.strip(" "):
        value = value[:len(value) - trail] + "\\ " * trail
    return value


def rfc2253_name(name_der: bytes) -> str:
    """A DER X.501 Name as Java's X500Principal.getName(RFC2253): the RDNs last first, the
    attributes of one RDN joined by '+'."""
    rdns = []
    _, pos, end, _ = _der_item(name_der, 0)  # SEQUENCE OF RelativeDistinguishedName
    while pos < end:
        _, set_pos, set_end, pos = _der_item(name_der, pos)  # SET OF AttributeTypeAndValue
        avas = []
        while set_pos < set_end:
            _, ava_pos, _, set_pos = _der_item(name_der, set_pos)
            _, oid_start, oid_end, value_pos = _der_item(name_der, ava_pos)
            oid = _oid(name_der[oid_start:oid_end])
            tag, v_start, v_end, v_item_end = _der_item(name_der, value_pos)
            keyword = _RFC2253_KEYWORDS.get(oid)
            encoding = _STRING_TAGS.get(tag)
            if keyword is None or encoding is None:
                avas.append(f"{keyword or oid}=#{name_der[value_pos:v_item_end].hex()}")
            else:
                text = name_der[v_start:v_end].decode(encoding, errors="replace")
                avas.append(f"{keyword}={_escape_value(text)}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def certificate_subject(cert_der: bytes) -> str:
    """The RFC 2253 subject of a DER certificate."""
    from cryptography import x509
    cert = x509.load_der_x509_certificate(cert_der)
    return rfc2253_name(cert.subject.public_bytes())


# -- keystores and truststores

def _pem_blocks(text: str, kind: str) -> list[bytes]:
    """The DER of every PEM block whose label ends with ``kind`` ("CERTIFICATE", "PRIVATE KEY"),
    tolerating text around them as Kafka's PemParser does."""
    import base64
    label = r"[^\r\n-]*" + kind.replace(" ", r"\s+") + r"[^-]*"
    pattern = re.compile(r"-+BEGIN\s*" + label + r"-+\s+((?:\s*[^\r\n]*:[^\r\n]*[\r\n]+)*)"
                         r"([a-zA-Z0-9/+=\s]*)-+END\s*" + label + r"-+")
    return [base64.b64decode(re.sub(r"\s", "", m.group(2))) for m in pattern.finditer(text + "\n")]


def _load_certs(pem: str, what: str) -> list:
    from cryptography import x509
    blocks = _pem_blocks(pem, "CERTIFICATE")
    if not blocks:
        raise TlsConfigError(f"{what}: no CERTIFICATE entries in PEM (at least one certificate "
                             "expected)")
    try:
        return [x509.load_der_x509_certificate(b) for b in blocks]
    except ValueError as exc:
        raise TlsConfigError(f"{what}: invalid certificate: {exc}") from None


def _load_pem_key(pem: str, password: str | None, what: str):
    from cryptography.hazmat.primitives import serialization
    blocks = _pem_blocks(pem, "PRIVATE KEY")
    if not blocks:
        raise TlsConfigError(f"{what}: private key not provided (no PRIVATE KEY entry in PEM)")
    if len(blocks) != 1:
        raise TlsConfigError(f"{what}: expected one private key, but found {len(blocks)}")
    try:
        return serialization.load_der_private_key(
            blocks[0], password.encode() if password is not None else None)
    except TypeError as exc:  # encrypted without a password, or a password for a plain key
        raise TlsConfigError(f"{what}: {exc} (ssl.key.password)") from None
    except ValueError as exc:
        raise TlsConfigError(f"{what}: private key could not be loaded ({exc}); a wrong "
                             "ssl.key.password?") from None


def _read(path: str, setting: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TlsConfigError(f"{setting}: cannot read {path}: {exc.strerror or exc}") from None


def _store_format(data: bytes, declared: str, setting: str, path: str) -> str:
    """PKCS12 or PEM, from the declared type and the file's first bytes. JKS is Kafka's default
    type; a JKS file cannot be read here, a PKCS12 file under type JKS is read as Java reads it."""
    if declared == "PEM":
        return "PEM"
    if data[:4] == b"\xfe\xed\xfe\xed" or data[:4] == b"\xce\xce\xce\xce":
        raise TlsConfigError(
            f"{setting} {path} is a JKS keystore, which kbroker cannot read: convert it to "
            f"PKCS12 (keytool -importkeystore -srckeystore {path} -destkeystore store.p12 "
            "-deststoretype PKCS12) and set its type to PKCS12, or use PEM")
    if data[:1] != b"\x30":
        raise TlsConfigError(f"Failed to load SSL keystore {path} of type {declared}: not a "
                             f"PKCS12 file ({setting})")
    return "PKCS12"


def _check_type(value: str, setting: str) -> str:
    kind = (value or "JKS").strip().upper()
    if kind not in STORE_TYPES:
        raise TlsConfigError(f"{setting}={value}: {value} not found (kbroker reads PKCS12 and "
                             "PEM stores)")
    return kind


def load_keystore(s: dict) -> tuple | None:
    """(private key, [certificate chain]) from the keystore settings, with Kafka's checks and
    messages (DefaultSslEngineFactory.createKeystore); None when no keystore is configured."""
    kind = _check_type(s["ssl.keystore.type"], "ssl.keystore.type")
    location, password = s["ssl.keystore.location"], s["ssl.keystore.password"]
    key_password, key, chain = s["ssl.key.password"], s["ssl.keystore.key"], \
        s["ssl.keystore.certificate.chain"]
    if key is not None:
        if kind != "PEM":
            raise TlsConfigError(f"SSL private key can be specified only for PEM, but key store "
                                 f"type is {kind}.")
        if chain is None:
            raise TlsConfigError("SSL private key is specified, but certificate chain is not "
                                 "specified.")
        if location is not None:
            raise TlsConfigError("Both SSL key store location and separate private key are "
                                 "specified.")
        if password is not None:
            raise TlsConfigError("SSL key store password cannot be specified with PEM format, "
                                 "only key password may be specified.")
        return (_load_pem_key(key, key_password, "ssl.keystore.key"),
                _load_certs(chain, "ssl.keystore.certificate.chain"))
    if chain is not None:
        raise TlsConfigError("SSL certificate chain is specified, but private key is not "
                             "specified")
    if location is None:
        if password is not None:
            raise TlsConfigError("SSL key store is not specified, but key store password is "
                                 "specified.")
        return None
    data = _read(location, "ssl.keystore.location")
    if _store_format(data, kind, "ssl.keystore.location", location) == "PEM":
        if password is not None:
            raise TlsConfigError("SSL key store password cannot be specified with PEM format, "
                                 "only key password may be specified")
        text = data.decode("utf-8", errors="replace")
        what = f"Failed to load PEM SSL keystore {location}"
        return _load_pem_key(text, key_password, what), _load_certs(text, what)
    if password is None:
        raise TlsConfigError("SSL key store is specified, but key store password is not "
                             "specified.")
    from cryptography.hazmat.primitives.serialization import pkcs12
    try:
        key_obj, cert, extra = pkcs12.load_key_and_certificates(data, password.encode())
    except ValueError as exc:
        raise TlsConfigError(f"Failed to load SSL keystore {location} of type {kind}: {exc} "
                             "(a wrong ssl.keystore.password?)") from None
    if key_obj is None or cert is None:
        raise TlsConfigError(f"SSL keystore {location} holds no private key with its "
                             "certificate")
    return key_obj, [cert, *extra]


def load_truststore(s: dict) -> list | None:
    """The trusted certificates (DefaultSslEngineFactory.createTruststore); None when no
    truststore is configured."""
    kind = _check_type(s["ssl.truststore.type"], "ssl.truststore.type")
    location, password, certs = s["ssl.truststore.location"], s["ssl.truststore.password"], \
        s["ssl.truststore.certificates"]
    if certs is not None:
        if kind != "PEM":
            raise TlsConfigError(f"SSL trust store certs can be specified only for PEM, but "
                                 f"trust store type is {kind}.")
        if location is not None:
            raise TlsConfigError("Both SSL trust store location and separate trust "
                                 "certificates are specified.")
        if password is not None:
            raise TlsConfigError("SSL trust store password cannot be specified for PEM format.")
        return _load_certs(certs, "ssl.truststore.certificates")
    if location is None:
        if password is not None:
            raise TlsConfigError("SSL trust store is not specified, but trust store password "
                                 "is specified.")
        return None
    data = _read(location, "ssl.truststore.location")
    if _store_format(data, kind, "ssl.truststore.location", location) == "PEM":
        if password is not None:
            raise TlsConfigError("SSL trust store password cannot be specified for PEM format.")
        return _load_certs(data.decode("utf-8", errors="replace"),
                           f"Failed to load PEM SSL truststore {location}")
    from cryptography.hazmat.primitives.serialization import pkcs12
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except ValueError as exc:
        hint = "a wrong ssl.truststore.password?" if password is not None else \
            "it may need ssl.truststore.password"
        raise TlsConfigError(f"Failed to load SSL keystore {location} of type {kind}: {exc} "
                             f"({hint})") from None
    found = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        found.insert(0, store.cert.certificate)
    if not found:
        raise TlsConfigError(f"SSL truststore {location} holds no certificate")
    return found


# -- cipher suites

_KX = {"ECDHE_ECDSA": "ECDHE-ECDSA-", "ECDHE_RSA": "ECDHE-RSA-", "DHE_RSA": "DHE-RSA-",
       "DHE_DSS": "DHE-DSS-", "RSA": "", "ECDHE_PSK": "ECDHE-PSK-", "PSK": "PSK-"}
_CIPHER = {"AES_128_GCM": "AES128-GCM", "AES_256_GCM": "AES256-GCM", "AES_128_CBC": "AES128",
           "AES_256_CBC": "AES256", "CHACHA20_POLY1305": "CHACHA20-POLY1305",
           "AES_128_CCM": "AES128-CCM", "AES_256_CCM": "AES256-CCM",
           "ARIA_128_GCM": "ARIA128-GCM", "ARIA_256_GCM": "ARIA256-GCM",
           "CAMELLIA_128_CBC": "CAMELLIA128", "CAMELLIA_256_CBC": "CAMELLIA256"}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                 "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                 "TLS_AES_128_CCM_8_SHA256"}


def openssl_cipher_name(name: str) -> str | None:
    """An IANA/Java cipher suite name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) as OpenSSL names
    it (ECDHE-RSA-AES128-GCM-SHA256); an OpenSSL name is returned as it is."""
    found = re.fullmatch(r"(?:TLS|SSL)_(\w+?)_WITH_(\w+?)_(SHA|SHA256|SHA384)", name)
    if found is None:
        return name if "-" in name or name.isalnum() else None
    kx, cipher, mac = found.groups()
    if kx not in _KX or cipher not in _CIPHER:
        return None
    base = _KX[kx] + _CIPHER[cipher]
    if cipher == "CHACHA20_POLY1305" or cipher.endswith("CCM"):
        return base
    if cipher.endswith("GCM") or mac != "SHA":
        return f"{base}-{mac}"
    return f"{base}-SHA"


def _apply_cipher_suites(context: ssl.SSLContext, suites: tuple) -> tuple[bool, bool]:
    """Restrict TLS 1.2 and older to the listed suites; returns whether any TLS 1.2 suite and any
    TLS 1.3 suite is listed (a version without one cannot be negotiated, as on Java). Python's
    ssl cannot narrow TLS 1.3's own suites: those are OpenSSL's defaults."""
    tls13 = [s for s in suites if s in _TLS13_SUITES]
    older = [s for s in suites if s not in _TLS13_SUITES]
    if not older:
        return False, bool(tls13)
    names = []
    for suite in older:
        name = openssl_cipher_name(suite)
        if name is None:
            raise TlsConfigError(f"ssl.cipher.suites: unsupported cipher suite {suite}")
        names.append(name)
    try:
        context.set_ciphers(":".join(names))
    except ssl.SSLError:
        raise TlsConfigError(f"ssl.cipher.suites: none of {', '.join(older)} is available in "
                             f"{ssl.OPENSSL_VERSION}") from None
    available = {c["name"] for c in context.get_ciphers()}
    missing = [s for s, n in zip(older, names) if n not in available]
    if missing:
        raise TlsConfigError(f"ssl.cipher.suites: unsupported cipher suite(s) "
                             f"{', '.join(missing)}")
    return True, bool(tls13)


# -- the listener's context

def check_settings(s: dict) -> None:
    """The checks that need no file: names and values a listener would refuse at start."""
    auth = (s["ssl.client.auth"] or "none").strip().lower()
    if auth not in CLIENT_AUTH:
        raise TlsConfigError(f"Invalid value {s['ssl.client.auth']} for configuration "
                             "ssl.client.auth: String must be one of: required, requested, none")
    _check_type(s["ssl.keystore.type"], "ssl.keystore.type")
    _check_type(s["ssl.truststore.type"], "ssl.truststore.type")
    if s["ssl.protocol"] not in PROTOCOL_MAX:
        raise TlsConfigError(f"ssl.protocol={s['ssl.protocol']}: {s['ssl.protocol']} SSLContext "
                             f"not available (one of {', '.join(PROTOCOL_MAX)})")
    enabled = s["ssl.enabled.protocols"]
    if len(set(enabled)) != len(enabled):
        raise TlsConfigError(f"ssl.enabled.protocols has duplicate values: {','.join(enabled)}")
    unknown = [p for p in enabled if p not in TLS_VERSIONS]
    if unknown:
        raise TlsConfigError(f"ssl.enabled.protocols: unsupported protocol(s) "
                             f"{', '.join(unknown)} (one of {', '.join(TLS_VERSIONS)})")
    PrincipalMapper(s["ssl.principal.mapping.rules"])


class ListenerTls:
    """One TLS listener: its SSLContext and how its connections get their principal."""

    def __init__(self, listener: str, security_protocol: str, settings: dict) -> None:
        check_settings(settings)
        self.listener = listener
        self.security_protocol = security_protocol
        self.mapper = PrincipalMapper(settings["ssl.principal.mapping.rules"])
        self.client_auth = (settings["ssl.client.auth"] or "none").strip().lower()
        self.context = self._context(settings)

    def _context(self, s: dict) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        enabled = [TLS_VERSIONS[p] for p in s["ssl.enabled.protocols"]]
        if enabled:
            lowest, highest = min(enabled), max(enabled)
            for version, option in _NO_VERSION.items():
                if lowest < version < highest and version not in enabled:
                    context.options |= getattr(ssl, option)
        else:  # the protocols of ssl.protocol's context, as Java's default enabled ones
            lowest, highest = ssl.TLSVersion.MINIMUM_SUPPORTED, PROTOCOL_MAX[s["ssl.protocol"]]
        if s["ssl.cipher.suites"]:
            with_older, with_tls13 = _apply_cipher_suites(context, s["ssl.cipher.suites"])
            if not with_tls13:
                highest = ssl.TLSVersion.TLSv1_2 if highest in (
                    ssl.TLSVersion.MAXIMUM_SUPPORTED, ssl.TLSVersion.TLSv1_3) else highest
            if not with_older:
                lowest = ssl.TLSVersion.TLSv1_3
        try:
            context.minimum_version = lowest
            context.maximum_version = highest
        except ValueError as exc:
            raise TlsConfigError(f"ssl.enabled.protocols: {exc}") from None
        keystore = load_keystore(s)
        if keystore is None:
            raise TlsConfigError(
                f"{self.security_protocol} listener {self.listener} has no keystore: set "
                "ssl.keystore.location (PKCS12 or PEM) or ssl.keystore.key and "
                "ssl.keystore.certificate.chain (or their "
                f"listener.name.{self.listener.lower()}. forms)")
        _load_key_and_chain(context, *keystore)
        trusted = load_truststore(s)
        if trusted is not None:
            from cryptography.hazmat.primitives.serialization import Encoding
            context.load_verify_locations(
                cadata="".join(c.public_bytes(Encoding.PEM).decode() for c in trusted))
        elif self.client_auth != "none":
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # as Java's default truststore
        context.verify_mode = CLIENT_AUTH[self.client_auth]
        return context

    def authenticate(self, conn, transport) -> None:
        """Give a connection of an SSL listener that finished its handshake its principal (on
        SASL_SSL, SASL gives it); a certificate no mapping rule applies to closes it."""
        ssl_object = transport.get_extra_info("ssl_object")
        try:
            conn.principal = self.principal(ssl_object)
        except NoMatchingRule as exc:
            conn.close(f"Failed to map name based on SSL principal mapping rules: {exc}")
            return
        if conn.broker.debug:
            log.debug("TLS connection", peer=conn.peer, listener=self.listener,
                      principal=str(conn.principal),
                      tls_version=ssl_object.version() if ssl_object is not None else None,
                      cipher=ssl_object.cipher()[0] if ssl_object is not None else None)

    def principal(self, ssl_object) -> KafkaPrincipal:
        """The principal of a connection that finished its handshake: the mapped subject of its
        client certificate, or User:ANONYMOUS without one. Raises NoMatchingRule."""
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return ANONYMOUS
        return KafkaPrincipal("User", self.mapper.name(certificate_subject(der)))


def _load_key_and_chain(context: ssl.SSLContext, key, chain: list) -> None:
    """Give the context the key and chain through a private temporary file (the key encrypted
    under a random password), removed as soon as OpenSSL has read it."""
    from cryptography.hazmat.primitives import serialization
    password = secrets.token_bytes(24).hex().encode()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(password))
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    fd, path = tempfile.mkstemp(prefix="kbroker-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        context.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"the keystore's private key and certificate do not go together "
                             f"({exc.reason or exc})") from None
    finally:
        os.unlink(path)


def listener_contexts(config) -> dict[str, ListenerTls]:
    """ListenerTls of every SSL and SASL_SSL listener, by listener name. Raises TlsConfigError
    naming the listener."""
    out = {}
    for name, protocol in config.security_protocols.items():
        if protocol in TLS_PROTOCOLS:
            try:
                out[name] = ListenerTls(name, protocol, listener_ssl_settings(config, name))
            except TlsConfigError as exc:
                raise TlsConfigError(f"listener {name}: {exc}") from None
    return out


def first_record_end(head) -> int | None:
    """Where the first TLS record of ``head`` (what a client sent so far) ends, or None while it
    has not all arrived. Bytes that are no handshake record, or a length past MAX_RECORD, end it
    at once: OpenSSL is handed them and refuses them as it does."""
    if head and head[0] != HANDSHAKE_RECORD:
        return len(head)
    if len(head) < RECORD_HEADER:
        return None
    length = int.from_bytes(head[3:5], "big")
    if length > MAX_RECORD:
        return len(head)
    end = RECORD_HEADER + length
    return end if len(head) >= end else None


def handshake_timeout_s(config) -> float:
    """ssl.handshake.timeout.ms, or connections.max.idle.ms when that is shorter (a connection
    in its handshake is idle to Kafka's broker, which has no other bound)."""
    bound = config["ssl.handshake.timeout.ms"]
    idle = config["connections.max.idle.ms"]
    if idle >= 0:
        bound = min(bound, idle)
    return max(bound, 1) / 1000.0


class ServerTlsProtocol(asyncio.sslproto.SSLProtocol):
    """The server side of one TLS connection, between the socket's transport and the Kafka
    connection: asyncio's TLS protocol, except that a failed handshake sends its alert before
    the connection closes, and that what the socket gives is read into a buffer shared by all
    of the loop's TLS connections.

    SSLProtocol gives every connection a 256 KiB bytearray (``max_size``) to read into, zeroed
    and so resident at once; its buffer_updated copies what was read into the SSL object's
    incoming MemoryBIO before anything else, and transports call get_buffer and buffer_updated
    back to back, so one buffer per loop serves every connection.

    Kafka's SSL engine writes the alert (certificate_required, handshake_failure, ...) and then
    closes; asyncio's and uvloop's own TLS transports drop it, so the client saw only an end of
    stream. The Java client takes an alert for an SslAuthenticationException and gives up at
    once; it takes an end of stream for a lost connection and retries until its timeout (1 s on
    Kafka against 5 s or more here for a client without a certificate on an mTLS listener).
    """

    def __init__(self, *args, read_buffer: memoryview, **kwargs) -> None:
        self.max_size = 0  # SSLProtocol.__init__ would allocate max_size bytes to read into
        super().__init__(*args, **kwargs)
        del self.max_size  # the class's again: the most one read of decrypted data takes
        self._ssl_buffer = read_buffer.obj
        self._ssl_buffer_view = read_buffer

    def get_buffer(self, n):
        return self._ssl_buffer_view

    def _on_handshake_complete(self, handshake_exc):
        if handshake_exc is not None and self._transport is not None:
            try:
                alert = self._outgoing.read()
                if alert:
                    self._transport.write(alert)
            except Exception:  # noqa: BLE001 - the close below happens either way
                pass
        super()._on_handshake_complete(handshake_exc)


def handshake_failure(exc: BaseException) -> str:
    """The reason of one failed handshake, for its one log line."""
    # asyncio and uvloop abort a handshake past ssl_handshake_timeout with
    # ConnectionAbortedError("SSL handshake is taking longer than N seconds: ...")
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) or (
            isinstance(exc, ConnectionAbortedError) and "longer than" in str(exc)):
        return "TLS handshake did not finish in time"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {exc.reason or exc}"
    return f"TLS handshake failed: {type(exc).__name__}: {exc}"


def is_tls_error(exc) -> bool:
    """Whether a connection was lost to a TLS error after its handshake (not a plain close)."""
    return isinstance(exc, ssl.SSLError) and not isinstance(exc, ssl.SSLEOFError)


def tls_error(exc: ssl.SSLError) -> str:
    return f"TLS error: {exc.reason or exc}"
