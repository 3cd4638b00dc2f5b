"""The console and ``/metrics`` over HTTPS with HTTP basic auth against the SCRAM users
(engine/server/http_security.py), served by ``python -m engine serve``, and the console's
produce form refused without WRITE on the topic when the ACL authorizer is on."""

from __future__ import annotations

import base64
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.serving import ServeProcess, free_port

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from tests.security.certs import make_pki
    root = tmp_path_factory.mktemp("http")
    (root / "pki").mkdir()
    pki = make_pki(str(root / "pki"))
    metrics_port, console_port = free_port(), free_port()
    srv = ServeProcess(root / "srv", "--config",
                       "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                       "--config", "sasl.enabled.mechanisms=SCRAM-SHA-256",
                       "--config", "ssl.keystore.type=PEM",
                       "--config", f"ssl.keystore.location={pki.path('server.pem')}",
                       "--config", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                       "--config", "super.users=User:ANONYMOUS",       # the PLAINTEXT listener: the test's admin
                       "--config", "connection.failed.authentication.delay.ms=50",
                       "--config", f"metrics.port={metrics_port}", "--config", f"console.port={console_port}",
                       "--config", "http.tls.listener=SASL_SSL", "--config", "http.authentication=basic").start()
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})
    futs = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret")])
    futs["alice"].result(timeout=30)
    admin.create_topics([ck.admin.NewTopic("web", 1, 1)])["web"].result(30)
    srv.admin = admin
    srv.ctx = ssl.create_default_context(cafile=pki.path("ca.pem"))
    srv.metrics_url = f"https://localhost:{metrics_port}/metrics"
    srv.console_url = f"https://localhost:{console_port}"
    yield srv
    _code, log = srv.stop()
    assert "Traceback" not in log, log[-4000:]


def _get(srv, url: str, user: str | None = None, password: str | None = None, data: bytes | None = None):
    req = urllib.request.Request(url, data=data)
    if user is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=srv.ctx), _NoRedirect)
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_metrics_need_a_scram_user_over_https(secured):
    status, headers, _ = _get(secured, secured.metrics_url)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic realm=")
    assert _get(secured, secured.metrics_url, "alice", "wrong")[0] == 401
    assert _get(secured, secured.metrics_url, "mallory", "alice-secret")[0] == 401
    status, _, body = _get(secured, secured.metrics_url, "alice", "alice-secret")
    assert status == 200 and b"kafka_server" in body or b"# HELP" in body


def test_plain_http_on_the_https_port_gets_nothing(secured):
    url = secured.metrics_url.replace("https://", "http://")
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(url, timeout=10).read()


def test_console_produce_needs_write_on_the_topic(secured):
    status, _, page = _get(secured, secured.console_url + "/topics/web", "alice", "alice-secret")
    assert status == 200
    token = re.search(rb"name='token' value='([^']+)'", page).group(1).decode()
    form = urllib.parse.urlencode({"token": token, "topic": "web", "partition": "0", "key": "",
                                   "value": "hello", "headers": ""}).encode()
    status, _, body = _get(secured, secured.console_url + "/produce", "alice", "alice-secret", data=form)
    assert status == 403 and b"TOPIC_AUTHORIZATION_FAILED" in body
    binding = ck.admin.AclBinding(ck.admin.ResourceType.TOPIC, "web", ck.admin.ResourcePatternType.LITERAL,
                                  "User:alice", "*", ck.admin.AclOperation.WRITE, ck.admin.AclPermissionType.ALLOW)
    secured.admin.create_acls([binding])[binding].result(30)
    status, headers, _ = _get(secured, secured.console_url + "/produce", "alice", "alice-secret", data=form)
    assert status == 303 and "offset=0" in headers["Location"]
    # and without credentials nothing at all
    assert _get(secured, secured.console_url + "/produce", data=form)[0] == 401


def test_a_plaintext_listener_cannot_serve_https(tmp_path):
    import subprocess
    import sys

    from tests.serving import ROOT
    out = subprocess.run([sys.executable, "-m", "engine", "serve", "--data-dir", str(tmp_path / "d"), "--config",
                          "listeners=PLAINTEXT://127.0.0.1:0", "--config", f"metrics.port={free_port()}",
                          "--config", "http.tls.listener=PLAINTEXT"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "http.tls.listener='PLAINTEXT' is not an SSL or SASL_SSL listener" in out.stderr, out.stderr[-2000:]
