"""The principal of a TLS client: Kafka's ``ssl.principal.mapping.rules`` over the
distinguished name of its certificate (no I/O)::

    mapper = SslPrincipalMapper.from_configs(configs, "EXTERNAL")   # listener.name.<l>. overrides
    principal = mapper.principal(tls_sock.getpeercert(binary_form=True))   # "User:alice"

:func:`dn_rfc2253` writes the certificate's subject as Java's ``X500Principal.getName()`` does
(reversed RDNs, ``OID=#hex`` for attribute types without a keyword), :class:`SslPrincipalMapper`
applies the rules (Kafka's splitter and parser grammar, Java's ``$n`` replacements with Kafka's
literal-escape rule, ``/L`` ``/U``); a client without a certificate is ``User:ANONYMOUS``.  The
key is read as the TLS contexts read theirs (``tls``); a mapper is immutable once built and safe
from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cryptography import x509

from engine.errors import InvalidConfigError, SslPrincipalMappingError
from engine.security.tls import DEFAULTS, _Conf

__all__ = ["ANONYMOUS", "SslPrincipalMapper", "dn_rfc2253"]

ANONYMOUS = "User:ANONYMOUS"

# X500Principal.getName() (RFC 2253) writes these attribute types by keyword, every other as
# <OID>=#<hex of the value's DER encoding>
_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
             "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
             "0.9.2342.19200300.100.1.1": "UID"}
_STRING_CODECS = {12: "utf-8", 28: "utf-32-be", 30: "utf-16-be"}    # others: ASCII / Latin-1


def _der_value(attr: x509.NameAttribute) -> bytes:
    tag = attr._type.value      # the ASN.1 string type the certificate used (no public accessor)
    value = attr.value
    body = value if isinstance(value, bytes) else value.encode(_STRING_CODECS.get(tag, "latin-1"))
    n = len(body)
    length = bytes([n]) if n < 128 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes(
        (n.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + body


def dn_rfc2253(name: x509.Name) -> str:
    """A distinguished name as Java's ``X500Principal.getName()`` writes it (RFC 2253): the
    RDNs from the last to the first (``CN=alice,OU=eng,O=acme,C=US``), special characters
    escaped with ``\\``, attribute types without a keyword as ``OID=#hex``."""
    rdns = []
    for rdn in reversed(name.rdns):
        parts = []
        for attr in rdn:
            keyword = _KEYWORDS.get(attr.oid.dotted_string)
            if keyword is not None:
                value = x509.Name([x509.RelativeDistinguishedName([attr])]).rfc4514_string()
                parts.append(keyword + "=" + value.split("=", 1)[1])
            else:
                parts.append(f"{attr.oid.dotted_string}=#{_der_value(attr).hex()}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


# Kafka's SslPrincipalMapper grammar: DEFAULT | RULE:pattern/replacement/[LU], comma separated,
# "\" escaping "/" or "," inside a pattern or replacement
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


def _replacement(text: str, pattern: re.Pattern[str]) -> list[str | int | tuple[str]]:
    """Java's Matcher replacement syntax (``$n``, ``${name}``, ``\\x``) as literal strings and
    group references (a number, or a name in a 1-tuple), with Kafka's rule that a ``$n`` naming
    no group is literal text."""
    groups = pattern.groups
    out: list[str | int | tuple[str]] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 == len(text):
                raise ValueError("character to be escaped is missing")
            out.append(text[i + 1])
            i += 2
        elif c == "$":
            if i + 1 == len(text):
                raise ValueError("Illegal group reference: group index is missing")
            if text[i + 1] == "{":
                end = text.find("}", i + 2)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                name = text[i + 2:end]
                if name not in pattern.groupindex:
                    raise ValueError(f"No group with name {{{name}}}")
                out.append((name,))
                i = end + 1
                continue
            if not text[i + 1].isdigit():
                raise ValueError("Illegal group reference")
            first = int(text[i + 1])
            if groups > 0 and first > groups:       # Kafka escapes a reference to no group
                out.append("$")
                i += 1
                continue
            if first > groups:
                raise ValueError(f"No group {first}")
            ref, i = first, i + 2
            while i < len(text) and text[i].isdigit() and ref * 10 + int(text[i]) <= groups:
                ref, i = ref * 10 + int(text[i]), i + 1
            out.append(ref)
        else:
            out.append(c)
            i += 1
    return out


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "", case: str = ""):
        self.default = pattern is None
        self.text = "DEFAULT" if pattern is None else f"RULE:{pattern}/{replacement}" + (f"/{case}" if case else "")
        if pattern is None:
            return
        # Java's named groups (?<name>...) are Python's (?P<name>...)
        self.pattern = re.compile(re.sub(r"\(\?<(?=[A-Za-z])", "(?P<", pattern))
        self.parts = _replacement(replacement, self.pattern)
        self.case = case

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        if not self.pattern.fullmatch(dn):
            return None

        def expand(m: re.Match[str]) -> str:
            return "".join(p if isinstance(p, str) else (m.group(p if isinstance(p, int) else p[0]) or "")
                           for p in self.parts)

        result = self.pattern.sub(expand, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


class SslPrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``: a TLS client's principal name from the
    distinguished name of its certificate.

    Rules are tried in order; the first whose pattern matches the whole DN (RFC 2253 form, see
    :func:`dn_rfc2253`) gives the name: ``RULE:<pattern>/<replacement>/`` with Java's ``$1``
    group references, optionally ``/L`` or ``/U`` to lower- or upper-case the result;
    ``DEFAULT`` gives the DN itself.  Patterns are Python regular expressions, which agree with
    Java's on the constructs such rules use.  No match is
    :class:`~engine.errors.SslPrincipalMappingError`; a malformed rule is
    :class:`~engine.errors.InvalidConfigError` when the mapper is built."""

    KEY = "ssl.principal.mapping.rules"

    def __init__(self, rules: str | None = None):
        text = (DEFAULTS[self.KEY] if rules is None else rules).strip()
        self.rules: list[_Rule] = []
        for m in _SPLITTER.finditer(text):
            rule = m.group(1)
            p = _PARSER.match(rule)
            if p is None or p.end() != len(rule):
                rest = rule[p.end():] if p is not None else rule
                raise InvalidConfigError(f"{self.KEY}: Invalid rule: `{rule}`, unmatched substring: `{rest}`")
            try:
                if p.group(1) is not None:
                    self.rules.append(_Rule())
                elif p.group(2) is not None:
                    self.rules.append(_Rule(p.group(2), p.group(4), p.group(6)))
            except (re.error, ValueError) as e:
                raise InvalidConfigError(f"{self.KEY}: Invalid rule: `{rule}`: {e}") from None

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any], listener: str | None = None) -> SslPrincipalMapper:
        value = _Conf(configs, listener).get(cls.KEY)
        return cls(None if value is None else str(value))

    def name(self, dn: str) -> str:
        """The principal name for a distinguished name (RFC 2253 string)."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise SslPrincipalMappingError(f"No rules apply to {dn}, rules {self}")

    def principal(self, peer_certificate: bytes | x509.Certificate | None) -> str:
        """``User:<name>`` for a client's certificate (DER bytes as ``getpeercert(True)`` gives,
        or a parsed certificate); ``User:ANONYMOUS`` where the client sent none."""
        if peer_certificate is None:
            return ANONYMOUS
        if isinstance(peer_certificate, bytes):
            peer_certificate = x509.load_der_x509_certificate(peer_certificate)
        return "User:" + self.name(dn_rfc2253(peer_certificate.subject))

    def __str__(self) -> str:
        return "[" + ", ".join(r.text for r in self.rules) + "]"
