"""Kafka's ``sasl.jaas.config`` line: ``<LoginModule> <flag> (<key>=<value>)* ;``, parsed by
the rules of Kafka's ``JaasConfig`` (a ``java.io.StreamTokenizer`` set up as follows):

- bytes 0..32 are whitespace (line ends included);
- ``;`` and ``=`` are tokens of their own;
- ``"`` and ``'`` quote a value, with Java's escapes inside (``\\n``, ``\\t``, ``\\b``, ``\\f``,
  ``\\r``, ``\\a``, ``\\v``, octal ``\\ooo``, and ``\\x`` for any other ``x``, so ``\\"`` and
  ``\\\\``); a quote left open up to the line end or the text end is an error here (Java takes the
  rest of the line silently);
- ``/`` starts a comment: ``/* ... */``, ``// ...`` and a lone ``/`` to the line end -- so an
  unquoted value stops at ``/`` (quote values that hold one, e.g. paths);
- everything else is part of a word (an unquoted key or value, the module, the flag).

The flag is ``required``, ``requisite``, ``sufficient`` or ``optional`` in any case; each entry
ends with ``;``; a key given twice keeps its last value.  Several entries may follow each
other, though a broker's ``listener.name.<l>.<mechanism>.sasl.jaas.config`` must hold exactly
one (:func:`single_entry`).  Errors are :class:`~engine.errors.JaasConfigError`; their
messages never include option values (they are passwords).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from engine.errors import JaasConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_WORD_END = frozenset(";='\"/")


@dataclass(frozen=True)
class JaasEntry:
    """One login module of a JAAS line: its class name, control flag (lower case) and options."""

    login_module: str
    control_flag: str
    options: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:   # option values are passwords: never in logs
        return (f"JaasEntry({self.login_module!r}, {self.control_flag!r}, "
                f"options={sorted(self.options)!r})")


@dataclass(frozen=True)
class _Token:
    kind: str          # "word" (unquoted or quoted text) or the punctuation itself: ";" "="
    text: str
    pos: int


def _tokens(text: str) -> Iterator[_Token]:
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if ord(c) <= 32:
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    raise JaasConfigError(f"JAAS config: comment opened at {i} is never closed")
                i = end + 2
            else:           # '//' and a lone '/' both run to the end of the line
                while i < n and text[i] not in "\r\n":
                    i += 1
        elif c in ";=":
            yield _Token(c, c, i)
            i += 1
        elif c in "\"'":
            value, i = _quoted(text, i)
            yield _Token("word", value, i)
        else:
            start = i
            while i < n and ord(text[i]) > 32 and text[i] not in _WORD_END:
                i += 1
            yield _Token("word", text[start:i], start)


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The value of the quoted string opening at ``start`` and the index after its close."""
    quote, i, n = text[start], start + 1, len(text)
    out: list[str] = []
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c in "\r\n":
            break
        if c == "\\" and i + 1 < n:
            i += 1
            c = text[i]
            if c in "01234567":              # Java: up to three octal digits, at most \377
                digits = 3 if c in "0123" else 2
                j = i
                while j < n and j - i < digits and text[j] in "01234567":
                    j += 1
                out.append(chr(int(text[i:j], 8)))
                i = j
                continue
            out.append(_ESCAPES.get(c, c))
            i += 1
            continue
        out.append(c)
        i += 1
    raise JaasConfigError(f"JAAS config: the quote opened at {start} is not closed on its line")


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """The login modules of a ``sasl.jaas.config`` value, in order (at least one)."""
    if not isinstance(text, str):
        raise JaasConfigError(f"JAAS config must be a string, not {type(text).__name__}")
    tokens = _tokens(text)
    entries = []
    for tok in tokens:
        entries.append(_entry(tok, tokens))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def _entry(first: _Token, tokens: Iterator[_Token]) -> JaasEntry:
    if first.kind != "word":
        raise JaasConfigError(f"JAAS config: expected a login module class at {first.pos}, "
                              f"found {first.text!r}")
    module = first.text
    flag_tok = next(tokens, None)
    if flag_tok is None:
        raise JaasConfigError("Login module control flag not specified in JAAS config")
    flag = flag_tok.text.lower() if flag_tok.kind == "word" else ""
    if flag not in CONTROL_FLAGS:
        raise JaasConfigError(f"Invalid login module control flag {flag_tok.text!r} in JAAS config "
                              f"(one of {', '.join(CONTROL_FLAGS)})")
    options: dict[str, str] = {}
    for tok in tokens:
        if tok.kind == ";":
            return JaasEntry(module, flag, options)
        if tok.kind != "word":
            raise JaasConfigError(f"JAAS config: expected an option name at {tok.pos}, "
                                  f"found {tok.text!r}")
        eq = next(tokens, None)
        value = next(tokens, None) if eq is not None and eq.kind == "=" else None
        if value is None or value.kind != "word":
            raise JaasConfigError(f"Value not specified for key {tok.text!r} in JAAS config")
        options[tok.text] = value.text
    raise JaasConfigError("JAAS config entry not terminated by semi-colon")


def single_entry(text: str, login_module: str | None = None) -> JaasEntry:
    """The one login module of a broker's per-mechanism JAAS config; ``login_module``, when
    given, is the class it must name (e.g. :data:`PLAIN_LOGIN_MODULE`)."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(f"JAAS config must hold exactly one login module, not {len(entries)}")
    entry = entries[0]
    if login_module is not None and entry.login_module != login_module:
        raise JaasConfigError(f"JAAS config names login module {entry.login_module!r}; "
                              f"this mechanism takes {login_module!r}")
    return entry


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """The users a broker's PlainLoginModule entry accepts: option ``user_<name>="<password>"``
    for each (Kafka's PlainServerCallbackHandler)."""
    return {k[len("user_"):]: v for k, v in entry.options.items()
            if k.startswith("user_") and len(k) > len("user_")}


def listener_jaas_key(listener: str, mechanism: str) -> str:
    """The broker key holding a listener's JAAS line for a mechanism, as Kafka names it:
    ``listener.name.<listener lower>.<mechanism lower>.sasl.jaas.config``."""
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
