"""SASL on the broker (engine/server/sasl_handlers.py): a PLAINTEXT and a SASL_PLAINTEXT listener
side by side, real clients logging in with PLAIN and SCRAM, and the bad inputs closing the
connection or answering Kafka's codes."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest

from engine.errors import ErrorCode
from engine.protocol import messages as m
from engine.protocol.primitives import Reader
from engine.server.listener import listeners_from_configs

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
CONFIG = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "connection.failed.authentication.delay.ms": "300",
}


class SaslBroker:
    """A broker with PLAINTEXT and SASL_PLAINTEXT listeners on free ports of 127.0.0.1."""

    def __init__(self, data_dir: str, config: dict | None = None):
        import engine
        from engine.security.credentials import ScramCredentialStore
        from engine.server import BackgroundBroker
        cfg = dict(CONFIG, **(config or {}))
        self.engine = engine.open(data_dir, cfg, background=False)
        self.store = ScramCredentialStore(data_dir)
        listeners, _ = listeners_from_configs(
            {**cfg, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"},
            scram_credentials=self.store)
        self._bg = BackgroundBroker(self.engine, listeners=listeners, scram_credentials=self.store)
        self.broker = self._bg.broker
        self.plain_port = listeners[0].port
        self.sasl_port = listeners[1].port
        self.plain_bootstrap = f"127.0.0.1:{self.plain_port}"
        self.sasl_bootstrap = f"127.0.0.1:{self.sasl_port}"

    def stop(self):
        self._bg.stop()
        self.engine.close()


@pytest.fixture
def sasl_broker(tmp_path):
    b = SaslBroker(str(tmp_path / "data"))
    yield b
    b.stop()


# -- raw wire helpers ------------------------------------------------------------------------
def _request(key: int, version: int, body: bytes, corr: int = 1, client_id: str = "t") -> bytes:
    cid = client_id.encode()
    header = struct.pack(">hhih", key, version, corr, len(cid)) + cid
    if m.is_flexible(key, version):
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _read_frame(s: socket.socket) -> bytes | None:
    head = _recv_exact(s, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _recv_exact(s, size)


def _recv_exact(s, n):
    out = b""
    while len(out) < n:
        try:
            chunk = s.recv(n - len(out))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        out += chunk
    return out


def _closed(s: socket.socket, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def _handshake(s, mechanism: str, version: int = 1):
    body = m.encode(m.ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism}, response=False)
    s.sendall(_request(m.ApiKey.SASL_HANDSHAKE, version, body))
    frame = _read_frame(s)
    return _response(m.ApiKey.SASL_HANDSHAKE, version, frame)


def _authenticate(s, token: bytes, version: int = 2):
    body = m.encode(m.ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token}, response=False)
    s.sendall(_request(m.ApiKey.SASL_AUTHENTICATE, version, body))
    frame = _read_frame(s)
    if frame is None:
        return None
    return _response(m.ApiKey.SASL_AUTHENTICATE, version, frame)


def _response(key: int, version: int, frame: bytes):
    """The response entity after the correlation id (and v1 header tags when flexible)."""
    from types import SimpleNamespace
    skip = 5 if m.is_flexible(key, version) else 4
    return SimpleNamespace(**m.read_struct(m._entity(key, version, True), Reader(frame[skip:])))


def _metadata(s) -> bytes | None:
    body = m.encode(m.ApiKey.METADATA, 1, {"topics": None}, response=False)
    s.sendall(_request(m.ApiKey.METADATA, 1, body))
    return _read_frame(s)


# -- the wire contract -----------------------------------------------------------------------
def test_plain_v1_then_requests(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
        hs = _handshake(s, "PLAIN")
        assert hs.error_code == 0
        assert list(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        resp = _authenticate(s, b"\0alice\0alice-secret")
        assert resp.error_code == 0 and resp.error_message is None
        assert _metadata(s) is not None
        # a second handshake or authenticate after success: ILLEGAL_SASL_STATE, connection kept
        assert _handshake(s, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        resp = _authenticate(s, b"\0alice\0alice-secret")
        assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert _metadata(s) is not None
        principals = sasl_broker._bg.call(
            lambda: sorted((c.listener.name, c.principal) for c in sasl_broker.broker._connections))
        assert principals == [("SASL_PLAINTEXT", "User:alice")]


def test_plain_v0_raw_tokens(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
        assert _handshake(s, "PLAIN", version=0).error_code == 0
        token = b"\0alice\0alice-secret"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert _read_frame(s) == b""          # PLAIN's empty answer, as a raw frame
        assert _metadata(s) is not None


def test_plain_v0_wrong_password_closes_unanswered(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
        assert _handshake(s, "PLAIN", version=0).error_code == 0
        token = b"\0alice\0wrong"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert _closed(s)


def test_wrong_password_fails_after_the_delay_and_closes(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
        assert _handshake(s, "PLAIN").error_code == 0
        t0 = time.monotonic()
        resp = _authenticate(s, b"\0alice\0wrong")
        waited = time.monotonic() - t0
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert waited >= 0.25                    # connection.failed.authentication.delay.ms=300
        assert _closed(s)


def test_unknown_mechanism_lists_the_enabled_and_closes(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
        hs = _handshake(s, "GSSAPI")
        assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert list(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert _closed(s)


@pytest.mark.parametrize("handshake_first", [False, True])
def test_request_before_authentication_closes(sasl_broker, handshake_first):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
        if handshake_first:
            assert _handshake(s, "PLAIN").error_code == 0
        assert _metadata(s) is None
        assert _closed(s)


def test_authenticate_before_handshake_closes(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
        assert _authenticate(s, b"\0alice\0alice-secret") is None
        assert _closed(s)


def test_oversized_pre_auth_frame_closes(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
        s.sendall(struct.pack(">i", 524288 + 1) + b"\0" * 64)
        assert _closed(s)
    # the same size is a request like any other on the PLAINTEXT listener (refused as a body
    # that does not parse, not on its size)


def test_plaintext_listener_needs_no_login_and_refuses_sasl(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.plain_port), timeout=5) as s:
        assert _metadata(s) is not None
        assert _handshake(s, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert _metadata(s) is not None


def test_metadata_answers_the_listener_connected_to(sasl_broker):
    from kafka import KafkaAdminClient
    for bootstrap, port, extra in [
            (sasl_broker.plain_bootstrap, sasl_broker.plain_port, {}),
            (sasl_broker.sasl_bootstrap, sasl_broker.sasl_port,
             {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
              "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"})]:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, **extra)
        try:
            brokers = admin.describe_cluster()["brokers"]
            assert [b["port"] for b in brokers] == [port]
        finally:
            admin.close()


# -- real clients ------------------------------------------------------------------------------
def _add_scram_users(bootstrap: str, **auth):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    admin = AdminClient({"bootstrap.servers": bootstrap, **auth})
    ups = [UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                        b"bob-secret"),
           UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                        b"carol-secret")]
    for fut in admin.alter_user_scram_credentials(ups).values():
        assert fut.result(timeout=30) is None
    described = {u: f.result(timeout=30)
                 for u, f in admin.describe_user_scram_credentials(["bob", "carol"]).items()}
    assert described["bob"].scram_credential_infos[0].iterations == 4096
    assert described["carol"].scram_credential_infos[0].mechanism == ScramMechanism.SCRAM_SHA_512


def _confluent_roundtrip(bootstrap: str, auth: dict) -> None:
    from confluent_kafka import Consumer, Producer
    topic = f"t-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": bootstrap, **auth})
    for i in range(5):
        p.produce(topic, f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + topic,
                  "auto.offset.reset": "earliest", **auth})
    c.subscribe([topic])
    got = []
    deadline = time.time() + 30
    while len(got) < 5 and time.time() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(5)]


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "bob", "bob-secret"),
    ("SCRAM-SHA-512", "carol", "carol-secret")])
def test_confluent_kafka_over_sasl(sasl_broker, mechanism, user, password):
    plain = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "admin", "sasl.password": "admin-secret"}
    _add_scram_users(sasl_broker.sasl_bootstrap, **plain)
    _confluent_roundtrip(sasl_broker.sasl_bootstrap,
                         {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                          "sasl.username": user, "sasl.password": password})


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_confluent_kafka_wrong_password(sasl_broker, mechanism):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient
    errors = []
    admin = AdminClient({"bootstrap.servers": sasl_broker.sasl_bootstrap,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                         "sasl.username": "alice", "sasl.password": "nope",
                         "error_cb": errors.append})
    deadline = time.time() + 15
    while not errors and time.time() < deadline:
        admin.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "bob", "bob-secret"),
    ("SCRAM-SHA-512", "carol", "carol-secret")])
def test_kafka_python_over_sasl(sasl_broker, mechanism, user, password):
    from kafka import KafkaConsumer, KafkaProducer
    _add_scram_users(sasl_broker.plain_bootstrap)        # through the PLAINTEXT listener
    auth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=sasl_broker.sasl_bootstrap, **auth)
    for i in range(3):
        p.send(topic, f"v{i}".encode())
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=sasl_broker.sasl_bootstrap,
                      auto_offset_reset="earliest", consumer_timeout_ms=10000, **auth)
    got = []
    for record in c:
        got.append(record.value)
        if len(got) == 3:
            break
    c.close()
    assert got == [b"v0", b"v1", b"v2"]


def test_aiokafka_wrong_password(sasl_broker):
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=sasl_broker.sasl_bootstrap,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                             sasl_plain_username="nobody", sasl_plain_password="x")
        try:
            await p.start()
        finally:
            await p.stop()

    with pytest.raises(KafkaError):
        asyncio.run(run())


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-512", "carol", "carol-secret")])
def test_aiokafka_over_sasl(sasl_broker, mechanism, user, password):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    _add_scram_users(sasl_broker.plain_bootstrap)
    auth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"ak-{uuid.uuid4().hex[:8]}"

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=sasl_broker.sasl_bootstrap, **auth)
        await p.start()
        try:
            for i in range(3):
                await p.send_and_wait(topic, f"v{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=sasl_broker.sasl_bootstrap,
                             auto_offset_reset="earliest", **auth)
        await c.start()
        try:
            got = []
            while len(got) < 3:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 30)
                for records in batch.values():
                    got.extend(r.value for r in records)
            return got
        finally:
            await c.stop()

    assert asyncio.run(run()) == [b"v0", b"v1", b"v2"]


# -- re-authentication (KIP-368) ---------------------------------------------------------------
@pytest.fixture
def reauth_broker(tmp_path):
    b = SaslBroker(str(tmp_path / "data"), {"connections.max.reauth.ms": "1500",
                                            "connection.failed.authentication.delay.ms": "0"})
    yield b
    b.stop()


def test_session_lifetime_and_reauthentication(reauth_broker):
    with socket.create_connection(("127.0.0.1", reauth_broker.sasl_port), timeout=5) as s:
        assert _handshake(s, "PLAIN").error_code == 0
        resp = _authenticate(s, b"\0alice\0alice-secret")
        assert resp.error_code == 0 and resp.session_lifetime == 1500
        assert _metadata(s) is not None
        time.sleep(1.1)                          # re-authentication at most once a second
        assert _handshake(s, "PLAIN").error_code == 0
        resp = _authenticate(s, b"\0alice\0alice-secret")
        assert resp.error_code == 0 and resp.session_lifetime == 1500
        time.sleep(1.0)                          # 2.1 s after the first login: the new session holds
        assert _metadata(s) is not None


def test_reauth_lifetime_per_mechanism(tmp_path):
    b = SaslBroker(str(tmp_path / "d"), {
        "connections.max.reauth.ms": "1500",
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "60000"})
    try:
        with socket.create_connection(("127.0.0.1", b.sasl_port), timeout=5) as s:
            assert _handshake(s, "PLAIN").error_code == 0
            assert _authenticate(s, b"\0alice\0alice-secret").session_lifetime == 60000
        log = b.engine.config.ignored
        assert "listener.name.sasl_plaintext.plain.connections.max.reauth.ms" not in log
    finally:
        b.stop()


def test_expired_session_closes_at_the_next_request(reauth_broker):
    with socket.create_connection(("127.0.0.1", reauth_broker.sasl_port), timeout=5) as s:
        assert _handshake(s, "PLAIN").error_code == 0
        assert _authenticate(s, b"\0alice\0alice-secret").error_code == 0
        time.sleep(1.7)
        assert _metadata(s) is None
        assert _closed(s)


@pytest.mark.parametrize("mechanism,token,message", [
    ("PLAIN", b"\0admin\0admin-secret", "Cannot change principals during re-authentication"),
    ("SCRAM-SHA-256", b"n,,n=alice,r=abc", "not supported for re-authentication of mechanism 'PLAIN'"),
])
def test_reauthentication_keeps_mechanism_and_principal(reauth_broker, mechanism, token, message):
    with socket.create_connection(("127.0.0.1", reauth_broker.sasl_port), timeout=5) as s:
        assert _handshake(s, "PLAIN").error_code == 0
        assert _authenticate(s, b"\0alice\0alice-secret").error_code == 0
        time.sleep(1.1)
        assert _handshake(s, mechanism).error_code == 0
        resp = _authenticate(s, token)
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert message in resp.error_message
        assert _closed(s)


def test_confluent_kafka_reauthenticates_and_keeps_producing(reauth_broker, caplog):
    import logging

    from confluent_kafka import Producer
    caplog.set_level(logging.INFO, logger="engine.server")
    p = Producer({"bootstrap.servers": reauth_broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"})
    topic = f"re-{uuid.uuid4().hex[:8]}"
    delivered = []
    deadline = time.time() + 4.5                 # three session lifetimes
    while time.time() < deadline:
        p.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
        p.poll(0.2)
    assert p.flush(30) == 0
    assert delivered and all(err is None for err in delivered)
    assert "SASL session expired" not in caplog.text      # re-authenticated, never cut off


# -- fuzz: mangled handshakes never crash the broker or leave it unable to serve ----------------
def test_fuzzed_sasl_exchanges(reauth_broker, caplog):
    sasl_broker = reauth_broker                   # (no failed-authentication delay)
    import logging
    import random
    caplog.set_level(logging.INFO, logger="engine.server")
    rnd = random.Random(19)
    scram_first = b"n,,n=alice,r=" + b"A" * 24
    seeds = [b"\0alice\0alice-secret", scram_first, b"", b"\0\0", b"n,a=bob,n=alice,r=x"]
    for _ in range(150):
        token = bytearray(rnd.choice(seeds))
        for _ in range(rnd.randint(0, 4)):
            op = rnd.randint(0, 2)
            pos = rnd.randint(0, len(token)) if token else 0
            if op == 0:
                token[pos:pos] = bytes([rnd.randint(0, 255)])
            elif op == 1 and token:
                del token[min(pos, len(token) - 1)]
            elif token:
                token[min(pos, len(token) - 1)] = rnd.randint(0, 255)
        mechanism = rnd.choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "plain", "", "X" * 300])
        version = rnd.choice([0, 1])
        with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
            hs = _handshake(s, mechanism, version)
            if hs.error_code:
                assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
                continue
            if version == 0:
                s.sendall(struct.pack(">i", len(token)) + bytes(token))
                _read_frame(s)                    # an answer or the close
            else:
                resp = _authenticate(s, bytes(token), rnd.choice([0, 1, 2]))
                assert resp is None or resp.error_code in (
                    0, ErrorCode.SASL_AUTHENTICATION_FAILED, ErrorCode.ILLEGAL_SASL_STATE)
    assert "authentication failed" in caplog.text          # (the broker's log is captured)
    assert "Traceback" not in caplog.text and "crashed" not in caplog.text
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=5) as s:
        assert _handshake(s, "PLAIN").error_code == 0
        assert _authenticate(s, b"\0alice\0alice-secret").error_code == 0
        assert _metadata(s) is not None
