"""One place that knows how each client spells its security settings, and a SASL_SSL broker.

A suite's broker fixture hands its tests a :class:`Bootstrap` -- a ``str`` (``host:port``) that
also carries the :class:`ClientSecurity` its clients need (``None``: PLAINTEXT). Wherever a
suite builds a client it asks this module for the client's settings, so the same tests run
unchanged over PLAINTEXT and over SASL_SSL::

    Producer(confluent(boot, **{"linger.ms": 5}))        # confluent-kafka / librdkafka
    KafkaProducer(**kafka_python(boot), linger_ms=5)      # kafka-python
    AIOKafkaProducer(**aiokafka(boot), linger_ms=5)       # aiokafka (an ssl_context)
    subprocess.run([KCAT, *kcat(boot), "-L"])              # kcat: -b and -X librdkafka keys
    [tool, "--bootstrap-server", boot, *command_config(boot)]   # Kafka's Java tools

:func:`serve_sasl_ssl` starts ``python -m engine serve`` with a PLAINTEXT listener (``srv.bootstrap``)
and a SASL_SSL one (SCRAM-SHA-512, the server certificate from tests/security/certs.py) and
creates the user through AlterUserScramCredentials on the PLAINTEXT listener, as an operator
would; it returns the process and the SASL_SSL :class:`Bootstrap`. :func:`in_process_sasl_ssl`
is the same for tests/server's in-process brokers.

Every SASL_SSL row of the suites runs by default, in CI too (92 tests, under a minute on 2
workers); ``ENGINE_SASL_SSL_FULL=0`` keeps only a representative subset (the others are
deselected, :func:`limit_sasl_ssl_rows`; docs/testing.md).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

import pytest

from tests.serving import ServeProcess, free_port

SASL_SSL_FULL = os.environ.get("ENGINE_SASL_SSL_FULL", "1") not in ("", "0")
USER, PASSWORD, MECHANISM = "suite-user", "suite-secret", "SCRAM-SHA-512"


@dataclass(frozen=True)
class ClientSecurity:
    """A client's security: SASL_SSL (SCRAM) or SSL (a client certificate), CA file to trust."""

    protocol: str                     # SASL_SSL or SSL
    cafile: str
    mechanism: str = MECHANISM
    username: str = ""
    password: str = ""
    certfile: str = ""                # PEM: the private key and the certificate chain (SSL, mTLS)
    properties_path: str = ""         # the Java tools' --command-config file (write_properties)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def confluent(self) -> dict:
        out = {"security.protocol": self.protocol, "ssl.ca.location": self.cafile}
        if self.sasl:
            out.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                        "sasl.password": self.password})
        if self.certfile:
            out.update({"ssl.certificate.location": self.certfile, "ssl.key.location": self.certfile})
        return out

    def kafka_python(self) -> dict:
        out = {"security_protocol": self.protocol, "ssl_cafile": self.cafile}
        if self.sasl:
            out.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": self.username,
                        "sasl_plain_password": self.password})
        if self.certfile:
            out.update({"ssl_certfile": self.certfile, "ssl_keyfile": self.certfile})
        return out

    def aiokafka(self) -> dict:
        from aiokafka.helpers import create_ssl_context
        ctx = create_ssl_context(cafile=self.cafile, certfile=self.certfile or None,
                                 keyfile=self.certfile or None)
        out: dict = {"security_protocol": self.protocol, "ssl_context": ctx}
        if self.sasl:
            out.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": self.username,
                        "sasl_plain_password": self.password})
        return out

    def java_properties(self) -> str:
        """The Java clients' properties (the CA and a client key store as PEM files)."""
        lines = [f"security.protocol={self.protocol}", "ssl.truststore.type=PEM",
                 f"ssl.truststore.location={self.cafile}"]
        if self.sasl:
            module = ("scram.ScramLoginModule" if self.mechanism.startswith("SCRAM")
                      else "plain.PlainLoginModule")
            lines += [f"sasl.mechanism={self.mechanism}",
                      f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
                      f'username="{self.username}" password="{self.password}";']
        if self.certfile:
            lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={self.certfile}"]
        return "\n".join(lines) + "\n"

    def write_properties(self, path: str) -> ClientSecurity:
        with open(path, "w") as f:
            f.write(self.java_properties())
        return ClientSecurity(**{**self.__dict__, "properties_path": path})


class Bootstrap(str):
    """``host:port`` plus the security its clients need (``security is None``: PLAINTEXT)."""

    security: ClientSecurity | None

    def __new__(cls, address: str, security: ClientSecurity | None = None) -> Bootstrap:
        self = super().__new__(cls, address)
        self.security = security
        return self


def _security(bootstrap: str) -> ClientSecurity | None:
    return getattr(bootstrap, "security", None)


def confluent(bootstrap: str, **conf) -> dict:
    """confluent-kafka's configuration dict: bootstrap.servers, the security keys, then `conf`."""
    sec = _security(bootstrap)
    return {"bootstrap.servers": str(bootstrap), **(sec.confluent() if sec else {}), **conf}


def kafka_python(bootstrap: str) -> dict:
    """kafka-python's keyword arguments: bootstrap_servers and the security ones."""
    sec = _security(bootstrap)
    return {"bootstrap_servers": str(bootstrap), **(sec.kafka_python() if sec else {})}


def aiokafka(bootstrap: str) -> dict:
    """aiokafka's keyword arguments: bootstrap_servers and the security ones (an ssl_context)."""
    sec = _security(bootstrap)
    return {"bootstrap_servers": str(bootstrap), **(sec.aiokafka() if sec else {})}


@functools.cache
def _kcat_scram_broken() -> bool:
    """kcat linked to librdkafka 2.0.x (Debian's 2.0.2) repeats its client nonce in the SCRAM
    client-final message (``r=<c-nonce><c-nonce><s-nonce>``); Kafka 4.0 refuses that
    ("Invalid client nonce in the final client message", String.equals as in RFC 5802) and so
    does our broker."""
    import shutil
    import subprocess
    tool = shutil.which("kcat") or shutil.which("kafkacat")
    if tool is None:
        return False
    out = subprocess.run([tool, "-V"], capture_output=True, text=True, timeout=30)
    return re.search(r"librdkafka 2\.0\.", out.stdout + out.stderr) is not None


def kcat(bootstrap: str) -> list[str]:
    """kcat's arguments: ``-b`` and a ``-X key=value`` per librdkafka security key. A kcat whose
    librdkafka cannot do SCRAM (:func:`_kcat_scram_broken`) logs in with PLAIN (same user and
    password, also enabled on :func:`serve_sasl_ssl`'s listener), still over TLS."""
    sec = _security(bootstrap)
    out = ["-b", str(bootstrap)]
    conf = sec.confluent() if sec else {}
    if sec and sec.sasl and sec.mechanism.startswith("SCRAM") and _kcat_scram_broken():
        conf["sasl.mechanism"] = "PLAIN"
    for k, v in conf.items():
        out += ["-X", f"{k}={v}"]
    return out


def command_config(bootstrap: str) -> list[str]:
    """A Java tool's ``--command-config FILE`` for this bootstrap (nothing for PLAINTEXT)."""
    sec = _security(bootstrap)
    if sec is None:
        return []
    if not sec.properties_path:
        raise ValueError("this ClientSecurity has no properties file: write_properties() it first")
    return ["--command-config", sec.properties_path]


# -- our broker with a SASL_SSL listener -----------------------------------------------------------
def serve_sasl_ssl(directory, *args: str) -> tuple[ServeProcess, Bootstrap]:
    """``python -m engine serve`` (PLAINTEXT ``srv.bootstrap`` + SASL_SSL SCRAM-SHA-512, `args`
    added), started, with USER's SCRAM credential created over the PLAINTEXT listener (PLAIN is
    enabled too, the same user from the JAAS line: only for a kcat that cannot do SCRAM)."""
    from tests.security.certs import make_pki
    directory = str(directory)
    pki_dir = os.path.join(directory, "pki")
    os.makedirs(pki_dir, exist_ok=True)
    pki = make_pki(pki_dir)
    port = free_port()
    srv = ServeProcess(os.path.join(directory, "broker"),
                       "--config", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{port}",
                       "--config", f"sasl.enabled.mechanisms={MECHANISM},PLAIN",
                       "--config", "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security"
                       f'.plain.PlainLoginModule required user_{USER}="{PASSWORD}";',
                       "--config", "ssl.keystore.type=PEM",
                       "--config", f"ssl.keystore.location={pki.path('server.pem')}",
                       *args).start()
    try:
        _create_user(srv.bootstrap)
    except BaseException:
        srv.stop()
        raise
    sec = ClientSecurity("SASL_SSL", pki.path("ca.pem"), username=USER, password=PASSWORD)
    sec = sec.write_properties(os.path.join(pki_dir, "client.properties"))
    return srv, Bootstrap(f"127.0.0.1:{port}", sec)


def in_process_sasl_ssl(make_broker, config: dict, directory: str):
    """The in-process form (tests/server's ``make_broker(config, **broker_kwargs)``): a broker
    with PLAINTEXT + SASL_SSL listeners, USER created through AlterUserScramCredentials on the
    PLAINTEXT one; its ``bootstrap`` is then the SASL_SSL :class:`Bootstrap`."""
    from engine.security.credentials import ScramCredentialStore
    from engine.server.listener import listeners_from_configs
    from tests.security.certs import make_pki
    os.makedirs(os.path.join(directory, "scram"), exist_ok=True)
    pki = make_pki(directory)
    cfg = {**config, "sasl.enabled.mechanisms": MECHANISM, "ssl.keystore.type": "PEM",
           "ssl.keystore.location": pki.path("server.pem")}
    store = ScramCredentialStore(os.path.join(directory, "scram"))
    listeners, _ = listeners_from_configs(
        {**cfg, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"}, scram_credentials=store)
    b = make_broker(cfg, listeners=listeners, scram_credentials=store)
    _create_user(b.bootstrap)
    sec = ClientSecurity("SASL_SSL", pki.path("ca.pem"), username=USER, password=PASSWORD)
    b.bootstrap = Bootstrap(f"127.0.0.1:{listeners[1].port}",
                            sec.write_properties(os.path.join(directory, "client.properties")))
    return b


def _create_user(plaintext_bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": plaintext_bootstrap})
    futs = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())])
    futs[USER].result(timeout=30)


def limit_sasl_ssl_rows(config, items, directory: str, param: str, ci_subset: set[str]) -> None:
    """Mark the ``sasl_ssl`` rows (``param`` == 'sasl_ssl') under `directory` ``sasl_ssl`` (select
    them with ``-m sasl_ssl``); with ENGINE_SASL_SSL_FULL=0 deselect those whose test function is
    not in `ci_subset`."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if (not str(item.path).startswith(directory + os.sep) or callspec is None
                or callspec.params.get(param) != "sasl_ssl"):
            kept.append(item)
            continue
        item.add_marker(pytest.mark.sasl_ssl)
        (kept if SASL_SSL_FULL or item.originalname in ci_subset else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
