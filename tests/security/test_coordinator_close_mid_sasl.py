"""Where librdkafka's "SASL authentication error: SaslAuthenticateRequest failed: Local: Broker
transport failure (after 0ms in state DOWN)" comes from when no broker closed anything (issue 19):
a consumer with a ``group.id`` closed while its group-coordinator connection is still logging in.
Closing the consumer clears the coordinator ("Closing connection due to nodename change ... in
state AUTH_REQ", a debug line), which fails the pending SaslAuthenticate with that error.  A
broker that closes the connection instead shows "Disconnected" (level 6) first
(tests/security/test_sasl_unknown_user.py covers that our broker answers instead).

Reproduced deterministically against our broker and Apache Kafka 4.0 alike: the broker's bytes go
through a proxy that delays them 100 ms (the advertised address is the proxy's, so the
coordinator connection goes through it too) and the consumer is closed as soon as its statistics
show the GroupCoordinator connection in AUTH_REQ.  A test of the client, not of the broker, kept
to back docs/security.md's reading of that line: it runs with ``SECURITY_KAFKA=1`` only (a JVM;
about 25 s for both rows), skipped without Kafka 4.0."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time

import pytest

from tests.security.certs import make_pki
from tests.security.test_java_tools_secure import KAFKA_ROW
from tests.serving import KafkaProcess, ServeProcess, find_kafka, free_port

pytestmark = pytest.mark.skipif(not KAFKA_ROW, reason="a test of librdkafka against both brokers: "
                                                      "SECURITY_KAFKA=1 (a JVM, CI time)")

DELAY = 0.1
ROUNDS = 3
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


class DelayProxy:
    """127.0.0.1:<port> -> the broker's port; the broker's bytes reach the client DELAY s late."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            server = self.loop.run_until_complete(asyncio.start_server(self._pipe, "127.0.0.1", 0))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)

    async def _pipe(self, client_r, client_w) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.close()
            return
        late: asyncio.Queue = asyncio.Queue()

        async def upstream() -> None:
            try:
                while data := await client_r.read(65536):
                    server_w.write(data)
                    await server_w.drain()
            except OSError:
                pass
            server_w.close()

        async def downstream_read() -> None:
            data = b"x"
            while data:
                try:
                    data = await server_r.read(65536)
                except OSError:
                    data = b""
                late.put_nowait((time.monotonic() + DELAY, data))

        async def downstream_write() -> None:
            while True:
                due, data = await late.get()
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if not data:
                    break
                try:
                    client_w.write(data)
                    await client_w.drain()
                except OSError:
                    break
            client_w.close()
        await asyncio.gather(upstream(), downstream_read(), downstream_write())

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module", params=["ours", "kafka"])
def node(request, tmp_path_factory):
    """(bootstrap through the proxy, CA file) of one broker with a SASL_SSL listener (PLAIN admin,
    SCRAM-SHA-512 user alice) advertised at the proxy's address."""
    directory = str(tmp_path_factory.mktemp(f"close-mid-sasl-{request.param}"))
    pki = make_pki(directory)
    sasl_port = free_port()
    proxy = DelayProxy(sasl_port)
    common = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
              "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
              "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
              "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
              "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}
    srv: ServeProcess | KafkaProcess
    if request.param == "ours":
        srv = ServeProcess(os.path.join(directory, "broker"), "--config",
                           f"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{sasl_port}", "--config",
                           f"advertised.listeners=PLAINTEXT://127.0.0.1:{free_port()},"
                           f"SASL_SSL://127.0.0.1:{proxy.port}",
                           *(a for k, v in common.items() for a in ("--config", f"{k}={v}")))
    else:
        home, why = find_kafka()
        if home is None:
            proxy.stop()
            pytest.skip(why)
        os.makedirs(os.path.join(directory, "kafka"))
        srv = KafkaProcess(home, os.path.join(directory, "kafka"))
        head = f"PLAINTEXT://127.0.0.1:{srv.port},CONTROLLER://127.0.0.1:{srv.controller_port}"
        srv.settings += [f"listeners={head},SASL_SSL://127.0.0.1:{sasl_port}",
                         f"advertised.listeners={head},SASL_SSL://127.0.0.1:{proxy.port}",
                         "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
                         f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_LOGIN}",
                         *(f"{k}={v}" for k, v in common.items())]
    srv.start()
    try:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )
        boot = f"127.0.0.1:{proxy.port}"
        admin = AdminClient({"bootstrap.servers": boot, "security.protocol": "SASL_SSL",
                             "ssl.ca.location": pki.path("ca.pem"), "sasl.mechanism": "PLAIN",
                             "sasl.username": "admin", "sasl.password": "admin-secret"})
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret")])["alice"].result(60)
        time.sleep(0.5)
        yield boot, pki.path("ca.pem")
    finally:
        if isinstance(srv, ServeProcess):
            _code, log = srv.stop()
            assert "Traceback" not in log, log[-4000:]
        else:
            srv.stop()
        proxy.stop()


def _close_in_auth_req(boot: str, cafile: str, group: str) -> bool:
    """A consumer closed as soon as its GroupCoordinator connection is in AUTH_REQ; False if that
    state was not seen within 20 s."""
    from confluent_kafka import Consumer
    seen = threading.Event()

    def stats(text: str) -> None:
        for name, b in json.loads(text).get("brokers", {}).items():
            if name.startswith("GroupCoordinator") and b.get("state") == "AUTH_REQ":
                seen.set()
    c = Consumer({"bootstrap.servers": boot, "security.protocol": "SASL_SSL", "ssl.ca.location": cafile,
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret",
                  "group.id": group, "debug": "broker", "statistics.interval.ms": 10, "stats_cb": stats})
    deadline = time.monotonic() + 20
    while not seen.is_set() and time.monotonic() < deadline:
        c.poll(0.01)
    time.sleep(DELAY / 2)          # the first SaslAuthenticate is out, its answer on the way
    c.close()
    return seen.is_set()


def test_closing_a_consumer_mid_sasl_logs_the_transport_failure(node, capfd):
    boot, cafile = node
    for i in range(ROUNDS):
        capfd.readouterr()
        assert _close_in_auth_req(boot, cafile, f"probe-{i}"), "the coordinator connection never reached AUTH_REQ"
        err = capfd.readouterr().err
        coord = [line for line in err.splitlines() if "GroupCoordinator" in line and "|FAIL|" in line]
        assert any(re.search(r"^%7\|.*Closing connection due to nodename change \(after \d+ms in state AUTH_REQ\)", x)
                   for x in coord), "\n".join(coord)
        assert any(x.startswith("%3|") and "SASL authentication error: SaslAuthenticateRequest failed: "
                   "Local: Broker transport failure (after 0ms in state DOWN)" in x for x in coord), "\n".join(coord)
        assert not any("Disconnected" in x for x in coord), "\n".join(coord)     # the broker closed nothing
