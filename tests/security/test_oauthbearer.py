"""SASL OAUTHBEARER on the broker (engine/security/oauthbearer.py, its validators and the session
lifetime in engine/server/sasl_handlers.py): one broker for the module with PLAINTEXT,
SASL_PLAINTEXT and SASL_SSL listeners, Kafka's ACL authorizer (super user admin) and the
unsecured validator requiring scope ``kafka``, plus a SECURED listener (SASL_PLAINTEXT) whose
tokens must be signed by a key of a JWKS file (Kafka's OAuthBearerValidatorCallbackHandler);
confluent-kafka logs in with librdkafka's unsecured JWT or with signed tokens from its
``oauth_cb``, bad tokens are built by hand and sent on the wire."""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import time
import uuid

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from engine.errors import ErrorCode, InvalidConfigError
from engine.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from engine.server.listener import listeners_from_configs
from tests.security.certs import make_pki
from tests.serving import find_kafka

from .test_broker_sasl import _authenticate, _closed, _handshake, _metadata, _read_frame

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import admin as ck_admin  # noqa: E402

JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
        'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka";')
REAUTH_MS = 60000
SECURED_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ISSUER, AUDIENCE = "https://idp.example", "kafka-broker"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)   # not in the JWKS


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _n(value: int) -> str:
    return _b64u(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def _jwks() -> dict:
    r, e = RSA_KEY.public_key().public_numbers(), EC_KEY.public_key().public_numbers()
    return {"keys": [{"kty": "RSA", "kid": "rsa1", "use": "sig", "alg": "RS256", "n": _n(r.n), "e": _n(r.e)},
                     {"kty": "EC", "kid": "ec1", "crv": "P-256", "x": _b64u(e.x.to_bytes(32, "big")),
                      "y": _b64u(e.y.to_bytes(32, "big"))}]}


def _signed(claims: dict, alg: str = "RS256", kid: str | None = "rsa1", key=None) -> str:
    header = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid else {})}
    data = f"{_b64u(json.dumps(header).encode())}.{_b64u(json.dumps(claims).encode())}"
    if alg == "ES256":
        r, s = decode_dss_signature((key or EC_KEY).sign(data.encode(), ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    else:
        sig = (key or RSA_KEY).sign(data.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{data}.{_b64u(sig)}"


def _jwt_claims(**kw) -> dict:
    now = int(time.time())
    return {"sub": "dave", "iss": ISSUER, "aud": [AUDIENCE, "other"], "iat": now, "exp": now + 600, **kw}


class OAuthBroker:
    def __init__(self, data_dir: str, pki, jwks_path: str):
        import engine
        from engine.server import BackgroundBroker
        cfg = {"sasl.enabled.mechanisms": "OAUTHBEARER",
               "listener.security.protocol.map":
                   "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SECURED:SASL_PLAINTEXT",
               "listener.name.secured.oauthbearer.sasl.jaas.config": f"{JAAS.split(' required ')[0]} required;",
               "listener.name.secured.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
               "listener.name.secured.sasl.oauthbearer.jwks.endpoint.url": "file://" + jwks_path,
               "listener.name.secured.sasl.oauthbearer.expected.audience": AUDIENCE,
               "listener.name.secured.sasl.oauthbearer.expected.issuer": ISSUER,
               "listener.name.secured.sasl.oauthbearer.clock.skew.seconds": "5",
               "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
               "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": JAAS,
               "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": str(REAUTH_MS),
               "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
               "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "super.users": "User:admin", "connection.failed.authentication.delay.ms": "0"}
        self.engine = engine.open(data_dir, cfg, background=False)
        listeners, _ = listeners_from_configs(
            {**cfg, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,"
                                 "SECURED://127.0.0.1:0"})
        self._bg = BackgroundBroker(self.engine, listeners=listeners)
        self.broker = self._bg.broker
        self.sasl_port = listeners[1].port
        self.sasl_plaintext, self.sasl_ssl, self.secured = (f"127.0.0.1:{li.port}" for li in listeners[1:])
        self.secured_port = listeners[3].port
        self.cafile = pki.path("ca.pem")

    def conf(self, protocol: str, principal: str, scope: str = "kafka", **extra) -> dict:
        out = {"bootstrap.servers": self.sasl_plaintext if protocol == "SASL_PLAINTEXT" else self.sasl_ssl,
               "security.protocol": protocol, "sasl.mechanism": "OAUTHBEARER",
               "enable.sasl.oauthbearer.unsecure.jwt": True,
               "sasl.oauthbearer.config": f"principal={principal} scope={scope}", **extra}
        if protocol == "SASL_SSL":
            out["ssl.ca.location"] = self.cafile
        return out

    def stop(self):
        self._bg.stop()
        self.engine.close()


@pytest.fixture(scope="module")
def ob(tmp_path_factory):
    pki = make_pki(str(tmp_path_factory.mktemp("oauth-pki")))
    jwks = tmp_path_factory.mktemp("oauth-jwks") / "jwks.json"
    jwks.write_text(json.dumps(_jwks()))
    b = OAuthBroker(str(tmp_path_factory.mktemp("oauth") / "data"), pki, str(jwks))
    yield b
    b.stop()


# -- tokens by hand ------------------------------------------------------------------------------
def _b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def _token(claims: dict, alg: str = "none", signature: str = "") -> str:
    return f"{_b64({'alg': alg})}.{_b64(claims)}.{signature}"


def _initial(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def _claims(**kw) -> dict:
    now = time.time()
    return {"sub": "alice", "iat": now, "exp": now + 3600, "scope": "kafka", **kw}


def _login(ob, token: str, *, authzid: str = "", port: int | None = None):
    s = socket.create_connection(("127.0.0.1", port or ob.sasl_port), timeout=5)
    assert _handshake(s, "OAUTHBEARER").error_code == 0
    return s, _authenticate(s, _initial(token, authzid))


# -- the wire ------------------------------------------------------------------------------------
def test_valid_token_authenticates_and_session_is_bounded_by_reauth_ms(ob):
    s, resp = _login(ob, _token(_claims()))
    with s:
        assert resp.error_code == 0 and bytes(resp.auth_bytes) == b""
        assert resp.session_lifetime == REAUTH_MS         # exp is an hour away: the key bounds it
        assert _metadata(s) is not None


def test_token_exp_bounds_the_session_then_the_connection_closes(ob):
    s, resp = _login(ob, _token(_claims(exp=time.time() + 1.5)))
    with s:
        assert resp.error_code == 0
        assert 500 < resp.session_lifetime <= 1500        # the token's exp, not the 60 s key
        assert _metadata(s) is not None
        time.sleep(1.7)                                   # past exp: the next request closes it
        assert _metadata(s) is None and _closed(s)


def test_reauthentication_keeps_the_principal(ob):
    s, resp = _login(ob, _token(_claims()))
    with s:
        assert resp.error_code == 0
        time.sleep(1.05)                                  # at most one re-authentication a second
        assert _handshake(s, "OAUTHBEARER").error_code == 0
        again = _authenticate(s, _initial(_token(_claims(exp=time.time() + 600))))
        assert again.error_code == 0 and 0 < again.session_lifetime <= 600_000
        assert _metadata(s) is not None
        time.sleep(1.05)
        assert _handshake(s, "OAUTHBEARER").error_code == 0
        other = _authenticate(s, _initial(_token(_claims(sub="mallory"))))
        assert other.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals" in other.error_message
        assert _closed(s)


@pytest.mark.parametrize("claims,alg,status", [
    (_claims(exp=time.time() - 10), "none", "invalid_token"),                  # expired
    ({k: v for k, v in _claims().items() if k != "sub"}, "none", "invalid_token"),   # no sub
    (_claims(scope=["read", "write"]), "none", "insufficient_scope"),          # scope kafka missing
    ({k: v for k, v in _claims().items() if k != "exp"}, "none", "invalid_token"),   # no exp
    (_claims(iat=time.time() + 600), "none", "invalid_token"),                 # issued in the future
    (_claims(), "HS256", "invalid_token"),                                     # signed: not unsecured
], ids=["expired", "no-sub", "missing-scope", "no-exp", "future-iat", "alg-hs256"])
def test_refused_token_json_error_then_failed_and_closed(ob, claims, alg, status):
    s, resp = _login(ob, _token(claims, alg))
    with s:
        assert resp.error_code == 0               # RFC 7628: the error travels in the auth bytes
        error = json.loads(bytes(resp.auth_bytes))
        assert error["status"] == status
        if status == "insufficient_scope":
            assert error["scope"] == "[kafka]"
        final = _authenticate(s, b"\x01")
        assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert json.loads(final.error_message) == error
        assert _closed(s)


@pytest.mark.parametrize("message", [
    b"n,,\x01auth=Bearer\x01\x01",                                  # no token
    b"n,,\x01auth=Basic abc.def.\x01\x01",                          # not Bearer
    b"n,,\x01host=x\x01\x01",                                       # no auth
    b"y,,\x01auth=Bearer abc.def.\x01\x01",                         # channel binding flag
    b"\x01",                                                        # ^A before any error
    b"",
], ids=["no-token", "basic", "no-auth", "gs2-y", "ctrl-a", "empty"])
def test_malformed_initial_response_fails_at_once(ob, message):
    with socket.create_connection(("127.0.0.1", ob.sasl_port), timeout=5) as s:
        assert _handshake(s, "OAUTHBEARER").error_code == 0
        resp = _authenticate(s, message)
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert resp.error_message == ("Authentication failed during authentication due to invalid "
                                      "credentials with SASL mechanism OAUTHBEARER")
        assert _closed(s)


def test_authzid_other_than_the_principal_fails(ob):
    s, resp = _login(ob, _token(_claims()), authzid="admin")
    with s:
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "different from the token's principal name (alice)" in resp.error_message
        assert _closed(s)


def test_handshake_lists_oauthbearer_and_refuses_plain(ob):
    with socket.create_connection(("127.0.0.1", ob.sasl_port), timeout=5) as s:
        hs = _handshake(s, "PLAIN")
        assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert list(hs.mechanisms) == ["OAUTHBEARER"]
        assert _read_frame(s) is None


# -- real clients --------------------------------------------------------------------------------
def _allow(ob, rtype, name, op, principal="User:alice"):
    ob.broker.access.authorizer.create([AclBinding(rtype, name, PatternType.PREFIXED, principal, "*", op,
                                                   AclPermissionType.ALLOW)])


def _produce(conf: dict, topic: str, values: list[bytes]) -> list:
    errors: list = []
    p = ck.Producer({**conf, "enable.idempotence": False, "message.timeout.ms": 10000})
    try:
        for v in values:
            p.produce(topic, v, on_delivery=lambda e, m: errors.append(e))
        p.flush(30)
    except ck.KafkaException as e:         # refused at once when the metadata said so
        errors.append(e.args[0])
    return errors


def test_confluent_kafka_over_sasl_plaintext_and_sasl_ssl_with_acls_on_alice(ob):
    prefix = "ob-" + uuid.uuid4().hex[:8]
    admin = ck_admin.AdminClient(ob.conf("SASL_SSL", "admin"))     # a super user
    topics = {proto: f"{prefix}-{proto.lower()}" for proto in ("SASL_PLAINTEXT", "SASL_SSL")}
    for f in admin.create_topics([ck_admin.NewTopic(t, 1, 1) for t in topics.values()]).values():
        f.result(30)
    # alice authenticates, but no ACL names her yet: refused
    errors = _produce(ob.conf("SASL_PLAINTEXT", "alice"), topics["SASL_PLAINTEXT"], [b"refused"])
    assert errors and errors[0].code() == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE):
        _allow(ob, ResourceType.TOPIC, prefix, op)
    _allow(ob, ResourceType.GROUP, prefix, AclOperation.READ)
    for proto, topic in topics.items():
        values = [f"{proto}-{i}".encode() for i in range(5)]
        assert _produce(ob.conf(proto, "alice"), topic, values) == [None] * 5
        c = ck.Consumer(ob.conf(proto, "alice", **{"group.id": f"{prefix}-g", "enable.auto.commit": False}))
        try:
            c.assign([ck.TopicPartition(topic, 0, 0)])      # no group join: its rebalance delay
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 5 and time.monotonic() < deadline:
                msg = c.poll(0.5)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    got.append(msg.value())
            assert got == values
        finally:
            c.close()
    # bob (authenticated the same way, no ACL) is still refused: the principal is the token's sub
    errors = _produce(ob.conf("SASL_SSL", "bob"), topics["SASL_SSL"], [b"refused"])
    assert errors and errors[0].code() == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_confluent_kafka_without_the_required_scope_fails_authentication(ob):
    errors: list = []
    p = ck.Producer({**ob.conf("SASL_PLAINTEXT", "alice", scope="read"), "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.1)
    assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION, errors
    assert "insufficient_scope" in errors[0].str()


# -- configuration -------------------------------------------------------------------------------
@pytest.mark.parametrize("extra,match", [
    ({}, "oauthbearer.sasl.jaas.config is not set"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
      "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "com.example.Mine"},
     "is not served"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
      "sasl.oauthbearer.jwks.endpoint.url": "file:///tmp/jwks.json"}, "set the handler class"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
      "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER},
     "jwks.endpoint.url is required"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
      "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
      "sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json"}, "cannot read the JWKS"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required;'}, "login module"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
      JAAS[:-1] + ' unsecuredValidatorAllowableClockSkewMs="-1";'}, "must not be negative"),
])
def test_configuration_refused_at_start(extra, match):
    cfg = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
           "sasl.enabled.mechanisms": "OAUTHBEARER", **extra}
    with pytest.raises(InvalidConfigError, match=match):
        listeners_from_configs(cfg)


def test_the_unsecured_validator_named_explicitly_is_served_and_the_jaas_line_is_hidden():
    from engine.config import is_sensitive
    key = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
    cfg = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
           "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
           "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
           "listener.name.sasl_plaintext.plain.sasl.jaas.config":
               'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";',
           key: "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                "OAuthBearerUnsecuredValidatorCallbackHandler"}
    (_plain, listener), _ = listeners_from_configs(cfg)
    assert listener.sasl is not None and listener.sasl.enabled_mechanisms == ["OAUTHBEARER", "PLAIN"]
    assert is_sensitive("listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config")


def test_ssl_listener_is_real_tls(ob):
    """The SASL_SSL port speaks TLS (a plaintext handshake there gets no answer)."""
    ctx = ssl.create_default_context(cafile=ob.cafile)
    host, port = ob.sasl_ssl.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        assert _handshake(s, "OAUTHBEARER").error_code == 0


def test_kafka_console_producer_with_the_unsecured_login_module(ob, tmp_path):
    """Kafka 4.0's own console producer, its OAuthBearerLoginModule making the unsecured token."""
    home, why = find_kafka()
    if home is None:
        pytest.skip(f"Kafka's Java tools are needed: {why}")
    topic = "ob-java-" + uuid.uuid4().hex[:8]
    admin = ck_admin.AdminClient(ob.conf("SASL_PLAINTEXT", "admin"))
    admin.create_topics([ck_admin.NewTopic(topic, 1, 1)])[topic].result(30)
    props = tmp_path / "producer.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                     'required unsecuredLoginStringClaim_sub="admin" unsecuredLoginListClaim_scope=",kafka";\n')
    r = subprocess.run([f"{home}/bin/kafka-console-producer.sh", "--bootstrap-server", ob.sasl_plaintext,
                        "--topic", topic, "--producer.config", str(props),
                        "--producer-property", "max.block.ms=20000"],
                       input="one\ntwo\n", capture_output=True, text=True, timeout=90,
                       env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    assert r.returncode == 0, r.stderr[-3000:]
    c = ck.Consumer(ob.conf("SASL_PLAINTEXT", "admin", **{"group.id": topic, "enable.auto.commit": False}))
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [b"one", b"two"]
    finally:
        c.close()


# -- the secured validator (KIP-768) -------------------------------------------------------------
@pytest.mark.parametrize("alg,kid", [("RS256", "rsa1"), ("ES256", "ec1"), ("RS256", None), ("ES256", None)],
                         ids=["rs256", "es256", "rs256-no-kid", "es256-no-kid"])
def test_secured_signed_token_authenticates(ob, alg, kid):
    s, resp = _login(ob, _signed(_jwt_claims(), alg, kid), port=ob.secured_port)
    with s:
        assert resp.error_code == 0 and bytes(resp.auth_bytes) == b""
        assert 590_000 < resp.session_lifetime <= 600_000          # the token's exp bounds it
        assert _metadata(s) is not None


def test_secured_token_expired_within_the_clock_skew_is_taken(ob):
    s, resp = _login(ob, _signed(_jwt_claims(exp=int(time.time()) - 2, iat=int(time.time()) - 60)),
                     port=ob.secured_port)
    with s:
        assert resp.error_code == 0 and resp.session_lifetime == 0


def _without(claims: dict, name: str) -> dict:
    return {k: v for k, v in claims.items() if k != name}


@pytest.mark.parametrize("token", [
    _signed(_jwt_claims(), key=OTHER_KEY),                                  # a key not in the JWKS
    _signed(_jwt_claims(), kid="nope"),                                     # unknown kid
    _signed(_jwt_claims(), "ES256", kid="rsa1"),                            # kid of another key type
    _token(_jwt_claims()),                                                  # alg none
    _signed(_jwt_claims(exp=int(time.time()) - 30)),                        # expired beyond the skew
    _signed(_jwt_claims(nbf=int(time.time()) + 600)),                       # not yet valid
    _signed(_jwt_claims(aud="someone-else")),                               # audience
    _signed(_without(_jwt_claims(), "aud")),
    _signed(_jwt_claims(iss="https://evil.example")),                       # issuer
    _signed(_without(_jwt_claims(), "iat")),                                # iat required
    _signed(_without(_jwt_claims(), "exp")),                                # exp required
    _signed(_without(_jwt_claims(), "sub")),                                # no principal
    _signed(_jwt_claims(scope=["a", "a"])),                                 # duplicate scope
    ".".join([_signed(_jwt_claims()).split(".")[0], _b64(_jwt_claims(sub="admin")),
              _signed(_jwt_claims()).split(".")[2]]),                       # claims swapped under a signature
], ids=["other-key", "unknown-kid", "wrong-kty", "alg-none", "expired", "nbf", "aud", "no-aud", "iss",
        "no-iat", "no-exp", "no-sub", "dup-scope", "tampered"])
def test_secured_refused_token_is_invalid_token_then_closed(ob, token):
    s, resp = _login(ob, token, port=ob.secured_port)
    with s:
        assert resp.error_code == 0
        assert json.loads(bytes(resp.auth_bytes)) == {"status": "invalid_token"}
        final = _authenticate(s, b"\x01")
        assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert _closed(s)


def test_confluent_kafka_oauth_cb_signed_token_with_acl(ob):
    topic = "ob-jwt-" + uuid.uuid4().hex[:8]
    admin = ck_admin.AdminClient(ob.conf("SASL_PLAINTEXT", "admin"))
    admin.create_topics([ck_admin.NewTopic(topic, 1, 1)])[topic].result(30)
    for op in (AclOperation.WRITE, AclOperation.DESCRIBE):
        _allow(ob, ResourceType.TOPIC, topic, op, principal="User:dave")

    def token(_config):
        claims = _jwt_claims()
        return _signed(claims, "ES256", "ec1"), claims["exp"]
    conf = {"bootstrap.servers": ob.secured, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": token}
    p = ck.Producer({**conf, "enable.idempotence": False, "message.timeout.ms": 10000})
    results: dict = {}
    p.produce(topic, b"signed", on_delivery=lambda e, m: results.__setitem__(m.value(), e))
    p.produce("ob-jwt-not-granted-" + uuid.uuid4().hex[:8], b"refused",
              on_delivery=lambda e, m: results.__setitem__(m.value(), e))
    p.flush(30)
    assert results[b"signed"] is None
    assert results[b"refused"].code() == ErrorCode.TOPIC_AUTHORIZATION_FAILED    # the principal is the JWT's sub


def test_secured_validator_over_an_http_jwks_endpoint():
    """sasl.oauthbearer.jwks.endpoint.url=http://...: fetched from a real HTTP server at start."""
    import http.server
    import threading
    body = json.dumps(_jwks()).encode()

    class Jwks(http.server.BaseHTTPRequestHandler):
        def do_GET(self):       # noqa: N802 (http.server's name)
            self.send_response(200 if self.path == "/jwks.json" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
               "sasl.enabled.mechanisms": "OAUTHBEARER",
               "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
               "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
               "sasl.oauthbearer.jwks.endpoint.url": f"http://127.0.0.1:{server.server_port}/jwks.json",
               "sasl.oauthbearer.sub.claim.name": "client_id", "sasl.oauthbearer.scope.claim.name": "scp"}
        (_plain, listener), _ = listeners_from_configs(cfg)
    finally:
        server.shutdown()
        server.server_close()
    auth = listener.sasl.create("OAUTHBEARER")
    claims = _jwt_claims(client_id="svc-1", scp=["read", "write"])
    assert auth.evaluate(_initial(_signed(claims, "ES256", "ec1"))) == b""
    assert auth.principal == "User:svc-1" and auth.credential_expiry_ms == claims["exp"] * 1000
