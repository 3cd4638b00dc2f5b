"""Kafka 4.0 and our broker configured the same secured way, for the security differential tests.

Both have a PLAINTEXT listener (Kafka's inter-broker/controller traffic, User:ANONYMOUS) and a
SASL_PLAINTEXT listener with PLAIN users admin/alice from the same JAAS line, Kafka's
StandardAuthorizer and ``super.users=User:admin;User:ANONYMOUS`` (KRaft's own PLAINTEXT traffic
is ANONYMOUS: without it the controller refuses the node's ControllerRegistration and
BrokerRegistration with CLUSTER_AUTHORIZATION_FAILED and Kafka never starts serving).  ``Secured``
holds one logged-in connection per user per broker; ``Side`` is one broker's view of it, so a
scenario is written once and run against each; ``acls()`` installs ACL bindings on both through
CreateAcls as admin and waits until Kafka's broker shows them (its controller commits them
first, the broker's authorizer learns them from the metadata log a moment later).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from tests.security.test_broker_sasl import PLAIN_JAAS, SaslBroker
from tests.serving import KafkaProcess, free_port

from .wire import Client, Pair, error_codes, normalize, plain

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin;User:ANONYMOUS"}
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
ANSWER_TIMEOUT = 8.0                 # a request unanswered this long is "no answer" (reconnected)
RETRIABLE = {3, 6, 14, 15, 16, 51}   # unknown/not leader, coordinator loading/unavailable/moved


def start_kafka(home: str, directory: str) -> KafkaProcess:
    """Kafka 4.0 with the SASL_PLAINTEXT listener and the authorizer; ``sasl_port`` and
    ``sasl_bootstrap`` name the SASL listener."""
    k = KafkaProcess(home, directory)
    sasl = free_port()
    while sasl in (k.port, k.controller_port):
        sasl = free_port()
    k.sasl_port = sasl                                       # type: ignore[attr-defined]
    k.sasl_bootstrap = f"127.0.0.1:{sasl}"                   # type: ignore[attr-defined]
    listeners = (f"PLAINTEXT://127.0.0.1:{k.port},CONTROLLER://127.0.0.1:{k.controller_port},"
                 f"SASL_PLAINTEXT://127.0.0.1:{sasl}")
    k.settings += [
        f"listeners={listeners}", f"advertised.listeners={listeners}",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT",
        f"sasl.enabled.mechanisms={MECHANISMS}",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        # SCRAM needs its login module named on the listener (no static JAAS file here)
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        *(f"{k_}={v}" for k_, v in AUTHORIZER.items()),
    ]
    return k.start()


def start_ours(directory: str) -> SaslBroker:
    """Ours: SaslBroker (PLAINTEXT + SASL_PLAINTEXT, the same JAAS line) with the same keys
    (run-kafka.sh's group.initial.rebalance.delay.ms=0 too)."""
    return SaslBroker(directory, {**AUTHORIZER, "group.initial.rebalance.delay.ms": "0"})


def _connect(port: int, user: str) -> Client:
    c = Client(port)
    c.sock.settimeout(ANSWER_TIMEOUT)
    c.login(user, f"{user}-secret")
    return c


class Secured:
    def __init__(self, ours, kafka):
        self.pairs = {user: Pair(ours, kafka, user=user, messages=True) for user in ("admin", "alice")}
        for pair in self.pairs.values():
            for c in pair.conns.values():
                c.sock.settimeout(ANSWER_TIMEOUT)
        admin = self.pairs["admin"]
        self.version = admin.version
        self.self_id = admin.self_id
        self.bootstrap = {"ours": ours.sasl_bootstrap, "kafka": kafka.sasl_bootstrap}

    def side(self, name: str) -> Side:
        return Side(self, name)

    def close(self) -> None:
        for p in self.pairs.values():
            p.close()


class Side:
    """One broker of the pair: ``call`` sends one request as a user and returns the answer
    normalized (node ids as "self", topic ids as "id"/"zero", messages kept)."""

    def __init__(self, sec: Secured, name: str):
        self.sec = sec
        self.name = name
        self.self_id = sec.self_id[name]
        self.bootstrap = sec.bootstrap[name]

    def call(self, key: int, data: dict, version: int | None = None, user: str = "alice",
             retry: set[int] | frozenset[int] = frozenset(), timeout: float = 15.0) -> dict:
        """``retry``: error codes answered while Kafka is still settling (a new topic's leader,
        a coordinator loading): the request is sent again until another answer comes."""
        pair = self.sec.pairs[user]
        v = self.sec.version[key] if version is None else version
        deadline = time.monotonic() + timeout
        while True:
            try:
                resp = plain(pair.conns[self.name].call(key, v, data))
            except (OSError, EOFError, AssertionError) as e:     # no answer, or the connection closed
                pair.conns[self.name].close()
                pair.conns[self.name] = _connect(pair.ports[self.name], user)
                return {"no_answer": "connection closed" if isinstance(e, EOFError) else type(e).__name__}
            if not set(error_codes(resp)) & set(retry) or time.monotonic() > deadline:
                return normalize(resp, self.self_id, messages=True)
            time.sleep(0.05)

    def conf(self, user: str = "alice", **extra) -> dict:
        """confluent-kafka's configuration for ``user`` on this broker's SASL listener."""
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret",
                **extra}


def binding(rtype: int, name: str, op: int, permission: int = 3, pattern: int = 3,
            principal: str = "User:alice", host: str = "*") -> dict:
    """A CreateAcls creation (resource types, operations, permissions, pattern types: Kafka's
    codes; ALLOW LITERAL by default)."""
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": host, "operation": op, "permission_type": permission}


def as_filter(b: dict) -> dict:
    return {"resource_type_filter": b["resource_type"], "resource_name_filter": b["resource_name"],
            "pattern_type_filter": b["resource_pattern_type"], "principal_filter": b["principal"],
            "host_filter": b["host"], "operation": b["operation"],
            "permission_type": b["permission_type"]}


def _shown(side: Side, b: dict) -> bool:
    resp = side.call(29, as_filter(b), user="admin")
    return resp["error_code"] == 0 and bool(resp["resources"])


def wait_acls(sec: Secured, bindings: list[dict], present: bool, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    for name in ("ours", "kafka"):
        side = sec.side(name)
        for b in bindings:
            while _shown(side, b) != present:
                assert time.monotonic() < deadline, f"{name} never {'showed' if present else 'dropped'} {b}"
                time.sleep(0.05)


def create_acls(sec: Secured, bindings: list[dict]) -> None:
    for name in ("ours", "kafka"):
        resp = sec.side(name).call(30, {"creations": bindings}, user="admin")
        assert all(r["error_code"] == 0 for r in resp["results"]), (name, resp)
    wait_acls(sec, bindings, True)


def delete_acls(sec: Secured, bindings: list[dict]) -> None:
    for name in ("ours", "kafka"):
        resp = sec.side(name).call(31, {"filters": [as_filter(b) for b in bindings]}, user="admin")
        assert all(r["error_code"] == 0 for r in resp["filter_results"]), (name, resp)
    wait_acls(sec, bindings, False)


@contextmanager
def acls(sec: Secured, bindings: list[dict]):
    create_acls(sec, bindings)
    try:
        yield
    finally:
        delete_acls(sec, bindings)
