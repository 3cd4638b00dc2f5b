"""OAUTHBEARER's secured validator keeps its JWKS fresh (engine/security/jwks_refresh.py, Kafka's
RefreshingHttpsJwks): one broker for the module with three SASL_PLAINTEXT listeners, each
checking signed tokens against the JWKS of its own real HTTP server on 127.0.0.1 that the test
changes while the broker runs; every refresh key is given with the ``listener.name.<l>.`` prefix.

- PERIODIC: refresh.ms 300 -- a key published after the start is used without any token asking;
- DEMAND: refresh.ms 1 h -- a token naming an unknown ``kid`` refetches the set at once;
- FLAKY: refresh.ms 300, short backoffs -- the server goes away and the keys in use stay."""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import socket
import threading
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from engine.errors import ErrorCode, InvalidConfigError
from engine.server.listener import listeners_from_configs

from .test_broker_sasl import _authenticate, _closed, _handshake
from .test_oauthbearer import SECURED_HANDLER, _b64u, _initial, _jwt_claims, _signed

LISTENERS = ("periodic", "demand", "flaky")


def _jwk(key: ec.EllipticCurvePrivateKey, kid: str) -> dict:
    nums = key.public_key().public_numbers()
    return {"kty": "EC", "kid": kid, "use": "sig", "crv": "P-256",
            "x": _b64u(nums.x.to_bytes(32, "big")), "y": _b64u(nums.y.to_bytes(32, "big"))}


class JwksServer:
    """A real HTTP server serving a JWKS the test replaces; counts the GETs."""

    def __init__(self, keys: list[dict]):
        self.keys = keys
        self.gets = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):       # noqa: N802 (http.server's name)
                outer.gets += 1
                body = json.dumps({"keys": outer.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/jwks.json"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def _config(servers: dict[str, JwksServer]) -> dict:
    cfg = {"sasl.enabled.mechanisms": "OAUTHBEARER", "connection.failed.authentication.delay.ms": "0",
           "listener.security.protocol.map": ",".join(f"{n.upper()}:SASL_PLAINTEXT" for n in LISTENERS)
                                             + ",PLAINTEXT:PLAINTEXT"}
    refresh = {"periodic": ("300", "100", "10000"), "demand": ("3600000", "100", "10000"),
               "flaky": ("300", "50", "200")}
    for name in LISTENERS:
        p = f"listener.name.{name}."
        cfg |= {p + "oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
                p + "oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
                p + "sasl.oauthbearer.jwks.endpoint.url": servers[name].url,
                p + "sasl.oauthbearer.jwks.endpoint.refresh.ms": refresh[name][0],
                p + "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": refresh[name][1],
                p + "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": refresh[name][2]}
    return cfg


class RefreshBroker:
    def __init__(self, data_dir: str):
        import engine
        from engine.server import BackgroundBroker
        self.first = {n: ec.generate_private_key(ec.SECP256R1()) for n in LISTENERS}
        self.servers = {n: JwksServer([_jwk(self.first[n], n + "1")]) for n in LISTENERS}
        cfg = _config(self.servers)
        self.engine = engine.open(data_dir, cfg, background=False)
        listeners, _ = listeners_from_configs(
            {**cfg, "listeners": "PLAINTEXT://127.0.0.1:0,"
                                 + ",".join(f"{n.upper()}://127.0.0.1:0" for n in LISTENERS)})
        self._bg = BackgroundBroker(self.engine, listeners=listeners)
        self.ports = {li.name.lower(): li.port for li in listeners}

    def login(self, listener: str, token: str) -> bool:
        """True when the broker takes the token; a refusal must be Kafka's: invalid_token, then
        SASL_AUTHENTICATION_FAILED and the connection closed."""
        with socket.create_connection(("127.0.0.1", self.ports[listener]), timeout=20) as s:
            assert _handshake(s, "OAUTHBEARER").error_code == 0
            resp = _authenticate(s, _initial(token))
            assert resp.error_code == 0
            if bytes(resp.auth_bytes) == b"":
                return True
            assert json.loads(bytes(resp.auth_bytes)) == {"status": "invalid_token"}
            assert _authenticate(s, b"\x01").error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert _closed(s)
            return False

    def stop(self):
        self._bg.stop()
        self.engine.close()
        for server in self.servers.values():
            server.close()


@pytest.fixture(scope="module")
def rb(tmp_path_factory):
    b = RefreshBroker(str(tmp_path_factory.mktemp("oauth-refresh") / "data"))
    yield b
    b.stop()


def _token(key, kid: str | None) -> str:
    return _signed(_jwt_claims(), "ES256", kid, key=key)


def test_a_key_published_after_the_start_is_taken_after_the_periodic_refresh(rb):
    new = ec.generate_private_key(ec.SECP256R1())
    no_kid = _token(new, None)              # without a kid nothing refetches on demand
    assert not rb.login("periodic", no_kid)
    assert rb.login("periodic", _token(rb.first["periodic"], "periodic1"))
    server = rb.servers["periodic"]
    server.keys = [_jwk(rb.first["periodic"], "periodic1"), _jwk(new, "periodic2")]
    deadline = time.monotonic() + 10
    while not rb.login("periodic", no_kid):
        assert time.monotonic() < deadline, "the periodic refresh never took the new key"
        time.sleep(0.1)
    assert rb.login("periodic", _token(new, "periodic2"))
    assert rb.login("periodic", _token(rb.first["periodic"], "periodic1"))


def test_an_unknown_kid_refetches_at_once_and_the_token_is_taken(rb):
    server = rb.servers["demand"]
    new = ec.generate_private_key(ec.SECP256R1())
    server.keys = [_jwk(rb.first["demand"], "demand1"), _jwk(new, "demand2")]
    before = server.gets
    t0 = time.monotonic()
    assert rb.login("demand", _token(new, "demand2"))      # the period is an hour
    assert time.monotonic() - t0 < 5 and server.gets == before + 1
    assert rb.login("demand", _token(new, "demand2"))      # now in the set: no fetch
    assert server.gets == before + 1


def test_an_unknown_kid_the_refetch_does_not_find_is_refused_and_not_refetched_again_soon(rb):
    server = rb.servers["demand"]
    ghost = ec.generate_private_key(ec.SECP256R1())
    before = server.gets
    assert not rb.login("demand", _token(ghost, "ghost"))
    assert server.gets == before + 1                          # it was looked for
    assert not rb.login("demand", _token(ghost, "ghost"))
    assert server.gets == before + 1                          # at most once a minute per kid
    assert rb.login("demand", _token(rb.first["demand"], "demand1"))


def test_the_jwks_server_down_during_refreshes_keeps_the_keys_in_use(rb, caplog):
    server = rb.servers["flaky"]
    new = ec.generate_private_key(ec.SECP256R1())
    server.keys = [_jwk(rb.first["flaky"], "flaky1"), _jwk(new, "flaky2")]
    assert rb.login("flaky", _token(new, "flaky2"))
    with caplog.at_level(logging.WARNING, logger="engine.security"):
        server.close()
        deadline = time.monotonic() + 10
        while not any("refresh failed, keeping the 2 key(s)" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "no refresh was tried while the server was down"
            time.sleep(0.1)
    assert rb.login("flaky", _token(rb.first["flaky"], "flaky1"))
    assert rb.login("flaky", _token(new, "flaky2"))
    assert not rb.login("flaky", _token(ec.generate_private_key(ec.SECP256R1()), "flaky3"))
    assert rb.login("flaky", _token(new, None))


def test_the_refresh_stops_with_the_factory(rb):
    """What the broker's start and stop call: no fetch after stop."""
    server = JwksServer([_jwk(rb.first["periodic"], "k")])
    try:
        cfg = {**_config({n: server for n in LISTENERS}), "listeners": "PLAINTEXT://127.0.0.1:0,PERIODIC://127.0.0.1:0"}
        (_plain, listener), _ = listeners_from_configs(cfg)

        async def run():
            listener.sasl.start()
            await asyncio.sleep(0.45)
            listener.sasl.stop()
        asyncio.run(run())
        after = server.gets
        assert after >= 2                   # the read at start and at least one refresh
        time.sleep(0.5)
        assert server.gets == after
    finally:
        server.close()


@pytest.mark.parametrize("key,value,match", [
    ("refresh.ms", "0", "refresh.ms must be positive"),
    ("retry.backoff.ms", "-1", "must not be negative"),
    ("retry.backoff.max.ms", "50", "is less than"),
    ("refresh.ms", "soon", "must be an integer"),
])
def test_bad_refresh_keys_are_refused_at_start(tmp_path, key, value, match):
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [_jwk(ec.generate_private_key(ec.SECP256R1()), "k")]}))
    cfg = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
           "sasl.enabled.mechanisms": "OAUTHBEARER",
           "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
               "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
           "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
           "sasl.oauthbearer.jwks.endpoint.url": "file://" + str(jwks),
           "listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint." + key: value}
    with pytest.raises(InvalidConfigError, match=match):
        listeners_from_configs(cfg)
