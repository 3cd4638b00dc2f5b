"""A JAAS login configuration *file* (what ``-Djava.security.auth.login.config=<path>`` names):
sections of login modules, each ``<Name> { <LoginModule> <flag> (<key>=<value>)* ; ... };``::

    KafkaServer {
      org.apache.kafka.common.security.plain.PlainLoginModule required
      username="admin" password="admin-secret";
    };
    Client {
      org.apache.zookeeper.server.auth.DigestLoginModule required
      username="kafka"
      password="kafka-secret";
    };

Comments (``/* */``, ``//``) and quoted values are as in a ``sasl.jaas.config`` line
(engine/security/jaas.py, which parses each section's body); a name given twice keeps its last
section, as Java's ``ConfigFile`` does.  Errors are :class:`~engine.errors.JaasConfigError`
naming the file (never an option value: they are passwords).
"""

from __future__ import annotations

from engine.errors import JaasConfigError
from engine.security.jaas import JaasEntry, parse_jaas_config

__all__ = ["parse_jaas_file", "read_jaas_section"]


def _skip(text: str, i: int) -> int:
    """The index after the comment or quoted string starting at `i` (`i` itself otherwise)."""
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    if text[i] == "/":
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text[i] in "\"'":
        j = i + 1
        while j < len(text) and text[j] != text[i] and text[j] not in "\r\n":
            j += 2 if text[j] == "\\" else 1
        return j + 1
    return i


def parse_jaas_file(text: str, where: str = "JAAS file") -> dict[str, list[JaasEntry]]:
    """Each section's login modules by section name."""
    sections: dict[str, list[JaasEntry]] = {}
    i, n = 0, len(text)
    while True:
        while i < n and (text[i].isspace() or text[i] == "/"):
            j = _skip(text, i) if text[i] == "/" else i + 1
            i = j
        if i >= n:
            return sections
        brace = text.find("{", i)
        name = text[i:brace].strip() if brace >= 0 else ""
        if not name or any(c.isspace() or c in ";}\"'" for c in name):
            raise JaasConfigError(f"{where}: expected '<section name> {{' at offset {i}")
        j = brace + 1
        while j < n and text[j] != "}":             # the body ends at the first '}' outside
            k = _skip(text, j)                       # comments and quotes
            j = k if k != j else j + 1
        if j >= n:
            raise JaasConfigError(f"{where}: section {name!r} is not closed by '}};'")
        body = text[brace + 1:j]
        try:
            sections[name] = parse_jaas_config(body)
        except JaasConfigError as e:
            raise JaasConfigError(f"{where}, section {name!r}: {e}") from None
        j += 1
        while j < n and text[j].isspace():
            j += 1
        if j >= n or text[j] != ";":
            raise JaasConfigError(f"{where}: section {name!r} must end with '}};'")
        i = j + 1


def read_jaas_section(path: str, section: str) -> list[JaasEntry] | None:
    """The login modules of `section` in the JAAS file at `path` (None when it has no such
    section); a file that cannot be read or parsed raises JaasConfigError."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise JaasConfigError(f"cannot read the JAAS file {path}: {e.strerror or e}") from None
    return parse_jaas_file(text, f"JAAS file {path}").get(section)
