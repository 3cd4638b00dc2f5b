"""docs/security.md's "From a CA to the first user", run as written: its shell, properties and
Python blocks in order, in a temporary directory, with the documented port swapped for a free one.
So the walkthrough stays true: a CA and broker certificate from openssl, a SASL_SSL-only broker
with an ACL authorizer, the administrator adding a SCRAM user and her ACLs, that user producing
and consuming with the CLI, and a topic outside her ACLs refused."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.serving import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "security.md")


def _blocks() -> list[tuple[str, str]]:
    with open(DOC) as f:
        text = f.read()
    section = re.search(r"^## From a CA to the first user\n(.*?)^## ", text, re.S | re.M)
    assert section, "docs/security.md lost its 'From a CA to the first user' section"
    return re.findall(r"^```(\w+)\n(.*?)^```", section.group(1), re.S | re.M)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_from_a_ca_to_the_first_user(tmp_path):
    blocks = _blocks()
    assert [lang for lang, _ in blocks] == ["sh", "properties", "python", "properties", "sh"]
    port = free_port()
    (certs, server, first_user, alice, use) = (b.replace("127.0.0.1:9093", f"127.0.0.1:{port}") for _, b in blocks)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))

    def run(argv, **kw):
        return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, **kw)

    r = run(["bash", "-e", "-c", certs])
    assert r.returncode == 0, r.stderr
    (tmp_path / "server.properties").write_text(server)
    (tmp_path / "alice.properties").write_text(alice)
    log = open(tmp_path / "serve.log", "wb")
    broker = subprocess.Popen([sys.executable, "-m", "engine", "serve", "server.properties"], cwd=tmp_path,
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    try:
        deadline = time.monotonic() + 60
        while "serving ./secure-data on" not in (tmp_path / "serve.log").read_text():
            assert broker.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.05)
        r = run([sys.executable, "-c", first_user])
        assert r.returncode == 0, r.stderr
        r = run(["bash", "-e", "-c", use])
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-2:] == ["k1=hello", "k2=world"], r.stdout
        r = run([sys.executable, "-m", "engine", "produce", "--bootstrap-server", f"127.0.0.1:{port}",
                 "--command-config", "alice.properties", "other"], input="x\n")
        assert r.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in r.stderr, (r.returncode, r.stderr)
    finally:
        broker.terminate()
        broker.wait(30)
    text = (tmp_path / "serve.log").read_text()
    assert "admin-secret" not in text and "jaas.config=[hidden]" in text, text
