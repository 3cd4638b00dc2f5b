"""Client quota configuration, as Kafka keeps it: who gets which ``producer_byte_rate``,
``consumer_byte_rate``, ``request_percentage`` and ``controller_mutation_rate`` (engine/server/
quotas.py and mutation_quotas.py enforce them), and which IP gets which
``connection_creation_rate`` (KIP-612, engine/server/ip_quotas.py).

An entity is a user, a client id, or both (Kafka's ClientQuotaEntity), each name either given
or ``None`` for the ``<default>`` entry: ``(("user", "alice"),)``, ``(("client-id", None),)``,
``(("user", "alice"), ("client-id", "c1"))``.  The values are per quota key; for one request
each key is looked up on its own in Kafka's order (ClientQuotaManager's DefaultQuotaCallback)::

    /config/users/<user>/clients/<client-id>       /config/users/<default>/clients/<default>
    /config/users/<user>/clients/<default>         /config/users/<default>
    /config/users/<user>                            /config/clients/<client-id>
    /config/users/<default>/clients/<client-id>    /config/clients/<default>

and the first entity that has the key gives the limit (``resolve``).  A ``<default>`` entry
applies to each user / client id on its own: its rate is measured per user / client id.  An
``ip`` entity stands alone (``(("ip", "10.0.0.1"),)``, ``(("ip", None),)`` the default for every
IP) and takes only ``connection_creation_rate`` (Kafka's QuotaConfig.ipConfigs).

AlterClientQuotas' rules are Kafka 4.0's (ClientQuotaControlManager): per entity, an error
(INVALID_REQUEST with Kafka's message) leaves that entity unchanged, the others are applied;
DescribeClientQuotas' filter is ClientQuotasImage.describe's.  An ``ip`` entity's name must be
an IP address or a name that resolves (Kafka: InetAddress.getByName), else INVALID_REQUEST
"<name> is not a valid IP or resolvable host.".

:class:`ClientQuotaStore` keeps them in ``client-quotas.json`` in the data directory, written
atomically (a crash leaves the old or the new set).  In cluster mode engine/cluster/quota_zk.py
keeps them in ZooKeeper where Kafka's ZooKeeper-mode brokers did (``/config/users/<user>``,
``/config/users/<user>/clients/<client-id>``, ``/config/clients/<client-id>``,
``/config/ips/<ip>``, ``<default>`` for a default entry; the forms are here: :func:`zk_path`,
:func:`zk_entity_path`).

Concurrency: thread-safe; listeners (the quota manager) are called after each change, on the
thread that made it.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from engine.errors import ErrorCode, QuotaFormatError
from engine.storage.checkpoint import write_atomic

__all__ = [
    "ALL_QUOTA_KEYS",
    "CLIENT_ID",
    "CONNECTION_CREATION_RATE",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "ClientQuotaStore",
    "DEFAULT",
    "Entity",
    "IP",
    "IP_QUOTA_KEYS",
    "PRODUCER_BYTE_RATE",
    "QUOTA_KEYS",
    "QuotaAlteration",
    "QuotaFormatError",
    "REQUEST_PERCENTAGE",
    "USER",
    "describe_quotas",
    "entity_text",
    "ip_entity_from_zk",
    "keys_for",
    "plan_alter",
    "resolve",
    "resolve_ip",
]

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
DEFAULT = "<default>"                 # a default entry's name in ZooKeeper paths and the tools
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# key -> Kafka's config type (QuotaConfig.userAndClientQuotaConfigs, QuotaConfig.ipConfigs)
QUOTA_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG", REQUEST_PERCENTAGE: "DOUBLE",
              CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_QUOTA_KEYS = {CONNECTION_CREATION_RATE: "INT"}
ALL_QUOTA_KEYS = {**QUOTA_KEYS, **IP_QUOTA_KEYS}
_LONG_MAX = float(2 ** 63 - 1)
_INT_MAX = float(2 ** 31 - 1)

# (("user", name|None), ("client-id", name|None)) -- user first, each type at most once
Entity = tuple[tuple[str, str | None], ...]

# DescribeClientQuotas match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity from (type, name) pairs, user first (the pairs must be valid)."""
    d = dict(pairs)
    return tuple((t, d[t]) for t in (USER, CLIENT_ID, IP) if t in d)


def entity_text(pairs: Iterable[tuple[str, str | None]]) -> str:
    """Kafka's ``ClientQuotaEntity.toString`` (its entries map in Java's HashMap order:
    client-id, user, ip)."""
    d = dict(pairs)
    order = [t for t in (IP, CLIENT_ID, USER) if t in d] + [t for t in d if t not in (IP, CLIENT_ID, USER)]
    return "ClientQuotaEntity(entries={" + ", ".join(
        f"{t}={'null' if d[t] is None else d[t]}" for t in sorted(order, key=_java_order)) + "})"


def _java_order(t: str) -> int:
    h = 0
    for c in t:
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & 15


# ---- AlterClientQuotas -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One AlterClientQuotas entry: the entity's (type, name) pairs as sent and its ops
    (key, value; ``None`` removes the key)."""
    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]


AlterResult = tuple[int, str | None]    # (error code, message) per alteration, in request order


def _validate_entity(pairs) -> str | Entity:
    if not pairs:
        return "Invalid empty client quota entity"
    seen: dict[str, str | None] = {}
    for etype, name in pairs:
        if etype in seen:
            return f"Invalid client quota entity, duplicate entity entry {etype}"
        if etype not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {etype}"
        seen[etype] = name
        if name is not None and name == "":
            return f"Empty {etype} not supported"
    if IP in seen:
        if USER in seen or CLIENT_ID in seen:
            # Kafka's message, its missing space included
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
        name = seen[IP]
        if name is not None and resolve_ip(name) is None:
            return f"{name} is not a valid IP or resolvable host."
    return make_entity(seen.items())


def resolve_ip(name: str) -> str | None:
    """An ip entity's name as one address (Kafka: InetAddress.getByName -- a literal, else the
    first address the name resolves to); None if it is neither."""
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return None
    return str(infos[0][4][0]) if infos else None


def _validate_value(key: str, value: float, keys: Mapping[str, str]) -> str | None:
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:
        return f"Quota {key} must be greater than 0"
    if kind in ("LONG", "INT"):
        if value > (_LONG_MAX if kind == "LONG" else _INT_MAX):
            return f"Proposed value for {key} is too large for {'a LONG' if kind == 'LONG' else 'an INT'}."
        if abs(math.fmod(value, 1.0)) > 1e-6:
            return f"{key} cannot be a fractional value."
    return None


def keys_for(entity: Entity) -> Mapping[str, str]:
    """The quota keys an entity takes: an ip entity's, or a user / client id entity's."""
    return IP_QUOTA_KEYS if entity and entity[0][0] == IP else QUOTA_KEYS


def plan_alter(current: Mapping[Entity, Mapping[str, float]], alterations: Sequence[QuotaAlteration]
               ) -> tuple[list[AlterResult], dict[Entity, dict[str, float]]]:
    """Kafka's decision (ClientQuotaControlManager.alterClientQuotas) over ``current``: the
    result of each alteration and the new quotas of each entity changed ({} = none left)."""
    results: list[AlterResult] = []
    changes: dict[Entity, dict[str, float]] = {}
    seen: set = set()
    for alt in alterations:
        raw = tuple(alt.entity)
        ops: dict[str, float | None] = {}
        error: str | None = None
        for key, value in alt.ops:
            if key in ops:
                error = f"Duplicate quota key {key} not updating quota for this entity {entity_text(raw)}"
            else:
                ops[key] = value
        ident = frozenset(raw)
        if error is not None or ident in seen:
            # Kafka answers a duplicate key with this message too (its second check overwrites)
            seen.add(ident)
            results.append((ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(raw)}"))
            continue
        seen.add(ident)
        entity = _validate_entity(raw)
        if isinstance(entity, str):
            results.append((ErrorCode.INVALID_REQUEST, entity))
            continue
        quotas = dict(changes.get(entity, current.get(entity, {})))
        for key, value in ops.items():
            if value is None:
                quotas.pop(key, None)
                continue
            error = _validate_value(key, float(value), keys_for(entity))
            if error is not None:
                break
            quotas[key] = float(value)
        if error is not None:
            results.append((ErrorCode.INVALID_REQUEST, error))
            continue
        if quotas != dict(current.get(entity, {})) or entity in changes:
            changes[entity] = quotas
        results.append((ErrorCode.NONE, None))
    return results, changes


# ---- DescribeClientQuotas ----------------------------------------------------------------

class DescribeFilterError(ValueError):
    """A DescribeClientQuotas filter Kafka refuses: ``code`` is the whole answer's error."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


def describe_quotas(current: Mapping[Entity, Mapping[str, float]],
                    components: Sequence[tuple[str, int, str | None]], strict: bool
                    ) -> list[tuple[Entity, dict[str, float]]]:
    """The entities matching a filter of (entity_type, match_type, match) components, as
    ClientQuotasImage.describe matches them; DescribeFilterError for a filter it refuses."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for etype, match_type, match in components:
        if not etype:
            raise DescribeFilterError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if etype in exact or etype in typed:
            raise DescribeFilterError(ErrorCode.INVALID_REQUEST,
                                      f"Entity type {etype} cannot appear more than once in the filter.")
        if etype not in (IP, USER, CLIENT_ID):
            raise DescribeFilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {etype}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise DescribeFilterError(ErrorCode.INVALID_REQUEST,
                                          "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[etype] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise DescribeFilterError(ErrorCode.INVALID_REQUEST,
                                          "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[etype] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise DescribeFilterError(ErrorCode.INVALID_REQUEST,
                                          "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(etype)
        else:
            raise DescribeFilterError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise DescribeFilterError(ErrorCode.INVALID_REQUEST,
                                  "Invalid entity filter component combination. IP filter component "
                                  "should not be used with user or clientId filter component.")
    out = []
    for entity, quotas in current.items():
        d = dict(entity)
        if strict and len(d) != len(exact) + len(typed):
            continue
        if all(t in d and d[t] == name for t, name in exact.items()) and all(t in d for t in typed):
            out.append((entity, dict(quotas)))
    return out


# ---- the precedence ----------------------------------------------------------------------

def resolve(quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
            ) -> tuple[float, tuple[str, str]] | None:
    """The limit of ``key`` for (user, client id) and the measurement it is counted under
    (Kafka's metric tags: (user or "", client id or "")), or None: no quota."""
    u, c = ((USER, user),), ((CLIENT_ID, client_id),)
    du, dc = ((USER, None),), ((CLIENT_ID, None),)
    for entity, tags in (
            (u + c, (user, client_id)), (u + dc, (user, client_id)), (u, (user, "")),
            (du + c, (user, client_id)), (du + dc, (user, client_id)), (du, (user, "")),
            (c, ("", client_id)), (dc, ("", client_id))):
        q = quotas.get(entity)
        if q is not None:
            limit = q.get(key)
            if limit is not None:
                return limit, tags
    return None


# ---- the store ---------------------------------------------------------------------------

def _entity_to_json(entity: Entity) -> dict:
    return {t: n for t, n in entity}


def _entity_from_json(doc, where: str) -> Entity:
    if not isinstance(doc, dict) or not doc or any(t not in (USER, CLIENT_ID, IP) for t in doc) \
            or (IP in doc and len(doc) > 1) \
            or any(n is not None and not isinstance(n, str) for n in doc.values()):
        raise QuotaFormatError(f"{where}: bad entity {doc!r}")
    return make_entity(doc.items())


def _quotas_from_json(doc, where: str, keys: Mapping[str, str]) -> dict[str, float]:
    if not isinstance(doc, dict):
        raise QuotaFormatError(f"{where}: quotas are not an object")
    out = {}
    for k, v in doc.items():
        if k not in keys or isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise QuotaFormatError(f"{where}: bad quota {k}={v!r}")
        out[k] = float(v)
    return out


class ClientQuotaStore:
    """The client quotas in ``client-quotas.json`` of a data directory::

        {"version": 1, "entities": [{"entity": {"user": "alice", "client-id": null},
                                     "quotas": {"producer_byte_rate": 1048576.0}}, ...]}

    (``null``: the ``<default>`` entry).  Every change rewrites the file atomically before
    it is in effect.  Listeners added with :meth:`listen` are called after each change."""

    FILENAME = "client-quotas.json"
    VERSION = 1

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, self.FILENAME)
        self._lock = threading.Lock()
        self._quotas: dict[Entity, dict[str, float]] = self._load()
        self._listeners: list[Callable[[], None]] = []

    def _load(self) -> dict[Entity, dict[str, float]]:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise QuotaFormatError(f"{self.path}: not a client quota file: {e}") from None
        if not isinstance(doc, dict) or doc.get("version") != self.VERSION \
                or not isinstance(doc.get("entities"), list):
            raise QuotaFormatError(f"{self.path}: expected {{\"version\": {self.VERSION}, \"entities\": [...]}}")
        out: dict[Entity, dict[str, float]] = {}
        for item in doc["entities"]:
            if not isinstance(item, dict):
                raise QuotaFormatError(f"{self.path}: bad entry {item!r}")
            entity = _entity_from_json(item.get("entity"), self.path)
            quotas = _quotas_from_json(item.get("quotas"), self.path, keys_for(entity))
            if quotas:
                out[entity] = quotas
        return out

    def _save(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        doc = {"version": self.VERSION, "entities": [
            {"entity": _entity_to_json(e), "quotas": dict(sorted(q.items()))}
            for e, q in sorted(quotas.items(), key=lambda x: repr(x[0]))]}
        write_atomic(self.path, json.dumps(doc, indent=1).encode("utf-8"))

    def listen(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def snapshot(self) -> dict[Entity, dict[str, float]]:
        with self._lock:
            return {e: dict(q) for e, q in self._quotas.items()}

    def describe(self, components: Sequence[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[Entity, dict[str, float]]]:
        with self._lock:
            return describe_quotas(self._quotas, components, strict)

    def alter(self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
              ) -> list[AlterResult]:
        """AlterClientQuotas: the per-entry results; unless ``validate_only`` the changes are
        saved before this returns."""
        with self._lock:
            results, changes = plan_alter(self._quotas, alterations)
            if not validate_only:
                self._apply_locked(changes)
        if changes and not validate_only:
            self._notify()
        return results

    def replace(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        """Make the whole set exactly ``quotas`` (cluster mode: what ZooKeeper holds)."""
        with self._lock:
            new = {e: dict(q) for e, q in quotas.items() if q}
            if new == self._quotas:
                return
            self._save(new)
            self._quotas = new
        self._notify()

    def _apply_locked(self, changes: Mapping[Entity, Mapping[str, float]]) -> None:
        if not changes:
            return
        new = {e: dict(q) for e, q in self._quotas.items()}
        for entity, quotas in changes.items():
            if quotas:
                new[entity] = dict(quotas)
            else:
                new.pop(entity, None)
        self._save(new)             # memory never runs ahead of the file
        self._quotas = new

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()


# ---- ZooKeeper: where Kafka's ZooKeeper-mode brokers kept them ----------------------------

def _sanitize(name: str | None) -> str:
    return DEFAULT if name is None else urllib.parse.quote(name, safe="")


def zk_entity_path(entity: Entity) -> str:
    """The change notification's ``entity_path``: ``users/<user>``, ``users/<user>/clients/<id>``,
    ``clients/<id>``, ``ips/<ip>`` (names sanitized as Kafka's Sanitizer does, ``<default>`` for
    a default)."""
    d = dict(entity)
    if IP in d:
        return f"ips/{_sanitize(d[IP])}"
    if USER in d and CLIENT_ID in d:
        return f"users/{_sanitize(d[USER])}/clients/{_sanitize(d[CLIENT_ID])}"
    if USER in d:
        return f"users/{_sanitize(d[USER])}"
    return f"clients/{_sanitize(d[CLIENT_ID])}"


def zk_path(entity: Entity) -> str:
    return "/config/" + zk_entity_path(entity)


def entity_from_zk(user_node: str | None, client_node: str | None) -> Entity:
    """The entity of a node under /config/users or /config/clients (sanitized names)."""
    pairs: list[tuple[str, str | None]] = []
    if user_node is not None:
        pairs.append((USER, None if user_node == DEFAULT else urllib.parse.unquote(user_node)))
    if client_node is not None:
        pairs.append((CLIENT_ID, None if client_node == DEFAULT else urllib.parse.unquote(client_node)))
    return make_entity(pairs)


def ip_entity_from_zk(ip_node: str) -> Entity:
    """The entity of a node under /config/ips (a sanitized name, or ``<default>``)."""
    return ((IP, None if ip_node == DEFAULT else urllib.parse.unquote(ip_node)),)


def quotas_from_zk_config(config: Mapping[str, str], where: str,
                          keys: Mapping[str, str] = QUOTA_KEYS) -> dict[str, float]:
    """The quota keys of a ZooKeeper config node's ``config`` object (its other keys, such as
    SCRAM credentials, are not quotas); a value that is not a positive number is ignored."""
    out = {}
    for key in keys:
        if key in config:
            try:
                value = float(config[key])
            except (TypeError, ValueError):
                continue
            if value > 0:
                out[key] = value
    return out


def zk_config_value(key: str, value: float) -> str:
    """A quota as Kafka's ZooKeeper-mode tools wrote it (a LONG without a fraction)."""
    if ALL_QUOTA_KEYS.get(key) in ("LONG", "INT"):
        return str(int(value))
    return repr(float(value))
