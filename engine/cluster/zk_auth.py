"""How a broker authenticates to ZooKeeper and which ACLs its znodes get, as ZooKeeper-era Kafka.

SASL: the ZooKeeper client logs in with the ``Client`` section (the JVM system property
``zookeeper.sasl.clientconfig`` names another) of the JAAS file named by
``java.security.auth.login.config`` -- the broker key of that name, else the
``-Djava.security.auth.login.config=<path>`` in the ``KAFKA_OPTS`` environment variable, which
is where Kafka's start scripts take it from.  That section holds ZooKeeper's
``org.apache.zookeeper.server.auth.DigestLoginModule`` with ``username`` and ``password``:
SASL DIGEST-MD5 (kazoo with pure-sasl); Kerberos (GSSAPI) is not supported.  A JAAS file
without that section means no SASL, as Kafka (``JaasUtils.isZkSaslEnabled``); a section with
``-Dzookeeper.sasl.client=false`` is Kafka's error.

ACLs (``zookeeper.set.acl=true``, Kafka's ``ZkData.defaultAcls``): every znode the broker
creates is ``CREATOR_ALL`` (all rights to the broker's SASL principal, ``sasl:<username>``,
which all brokers of a cluster therefore share) plus world READ -- except the credentials and
dynamic broker configs under :data:`SENSITIVE_ROOTS`, which only the principal can read, and
the old consumers' ``/consumers``, which stays open.  Without it (the default) znodes are open
(``world:anyone`` ALL).  ``zookeeper.set.acl=true`` without SASL credentials or a TLS client
certificate is refused at start, as Kafka (``KafkaZkClient.createZkClient``): ZooKeeper would have
no principal to give the rights to.

TLS (``zookeeper.ssl.client.enable``, engine/cluster/zk_tls.py): every session is TLS; with a
key store the broker's certificate is its ``x509:<DN>`` principal too.  SASL works over TLS.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo import exceptions as kazoo_errors
from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import AuthFailedError, NoAuthError, ZookeeperError
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from ..errors import InvalidConfigError, JaasConfigError, SslAuthenticationError, ZooKeeperAuthError
from ..security.jaas_file import read_jaas_section
from .zk_tls import ZkTls

__all__ = ["DIGEST_LOGIN_MODULE", "SENSITIVE_ROOTS", "ZkClientSecurity", "SecuredKazooClient",
           "java_system_properties", "start_client", "znode_acl"]

LOGIN_CONFIG = "java.security.auth.login.config"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
# Kafka's ZkData.SensitiveRootPaths: SCRAM credentials and quotas of users, dynamic broker
# configs (passwords among them), delegation tokens
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
CONSUMERS = "/consumers"
_SECURE_ACL = CREATOR_ALL_ACL + READ_ACL_UNSAFE
# what a refused login looks like to the first call (ZooKeeper 3.6+ requiring SASL:
# SESSIONCLOSEDREQUIRESASLAUTH, which kazoo names since 2.8)
_REFUSED: tuple[type[Exception], ...] = (AuthFailedError, NoAuthError) + tuple(
    c for c in (getattr(kazoo_errors, "SessionClosedRequireSaslError", None),) if c is not None)


def java_system_properties(kafka_opts: str | None) -> dict[str, str]:
    """The ``-Dkey=value`` system properties of a ``KAFKA_OPTS`` value (``-Dkey`` alone: "")."""
    props: dict[str, str] = {}
    try:
        words = shlex.split(kafka_opts or "")
    except ValueError as e:
        raise InvalidConfigError(f"KAFKA_OPTS: {e}") from None
    for w in words:
        if w.startswith("-D") and len(w) > 2:
            key, _, value = w[2:].partition("=")
            props[key] = value
    return props


def znode_acl(path: str, secure: bool) -> list:
    """Kafka's ``ZkData.defaultAcls(isSecure, path)`` for a znode path (without the chroot)."""
    if not secure or path == CONSUMERS:
        return list(OPEN_ACL_UNSAFE)
    if any(path.startswith(root) for root in SENSITIVE_ROOTS):
        return list(CREATOR_ALL_ACL)
    return list(_SECURE_ACL)


@dataclass(frozen=True)
class ZkClientSecurity:
    """The broker's ZooKeeper client security: SASL DIGEST-MD5 credentials (None: none) and
    whether its znodes get ACLs.  ``repr`` never shows the password."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    set_acl: bool = False
    jaas_file: str | None = None          # where the credentials came from (for messages)
    section: str = "Client"               # -Dzookeeper.sasl.clientconfig
    service: str = "zookeeper"            # -Dzookeeper.sasl.client.username
    tls: ZkTls | None = None              # zookeeper.ssl.client.enable (engine/cluster/zk_tls.py)

    @property
    def principal(self) -> str:
        if self.username:
            return f"sasl:{self.username}"
        if self.tls is not None and self.tls.client_certificate:
            return f"x509 (the certificate of {self.tls.client_certificate})"
        return "(none: no SASL)"

    @classmethod
    def from_config(cls, cfg: Any, environ: Mapping[str, str] | None = None) -> ZkClientSecurity:
        """From the broker's configuration (``java.security.auth.login.config``,
        ``zookeeper.set.acl``, ``zookeeper.ssl.*``) and ``KAFKA_OPTS``' ``-D`` system properties."""
        env = os.environ if environ is None else environ
        props = java_system_properties(env.get("KAFKA_OPTS"))
        where = "broker key " + LOGIN_CONFIG
        path = str(cfg[LOGIN_CONFIG] or "").strip()
        if not path and props.get(LOGIN_CONFIG):
            path, where = props[LOGIN_CONFIG], f"KAFKA_OPTS -D{LOGIN_CONFIG}"
        set_acl = bool(cfg["zookeeper.set.acl"])
        username = password = None
        section = props.get("zookeeper.sasl.clientconfig") or "Client"
        if path:
            entries = read_jaas_section(path, section)
            if entries:
                if props.get("zookeeper.sasl.client", "true").strip().lower() == "false":
                    raise InvalidConfigError(
                        f"the JAAS file {path} ({where}) has a {section!r} section, but "
                        "-Dzookeeper.sasl.client=false disables SASL in the ZooKeeper client")
                entry = entries[0]
                if entry.login_module != DIGEST_LOGIN_MODULE:
                    raise JaasConfigError(
                        f"JAAS file {path}, section {section!r}: login module {entry.login_module!r} "
                        f"is not supported for ZooKeeper; use {DIGEST_LOGIN_MODULE} (SASL DIGEST-MD5)")
                username, password = entry.options.get("username"), entry.options.get("password")
                if not username or password is None:
                    raise JaasConfigError(f"JAAS file {path}, section {section!r}: {DIGEST_LOGIN_MODULE} "
                                          "needs username and password")
        tls = ZkTls.from_config(cfg)
        if set_acl and username is None and (tls is None or tls.client_certificate is None):
            raise InvalidConfigError(
                "zookeeper.set.acl is true, but no SASL credentials for ZooKeeper were found and no TLS "
                "client certificate is configured: set "
                f"{LOGIN_CONFIG} (broker key, or -D{LOGIN_CONFIG}=<path> in KAFKA_OPTS) to a JAAS "
                f"file with a {section!r} section ({DIGEST_LOGIN_MODULE} username=... password=...)"
                + (f" ({path} has none)" if path else "")
                + ", or zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket and zookeeper.ssl.keystore.location")
        return cls(username, password, set_acl, path or None, section,
                   props.get("zookeeper.sasl.client.username") or "zookeeper", tls)

    def describe(self) -> str:
        """For the log: how the broker logs in and what its znodes get (never the password)."""
        login = f"SASL DIGEST-MD5 as {self.principal}" if self.username else "no SASL login"
        wire = f"{self.tls.describe()}, " if self.tls is not None else ""       # none: plaintext
        return f"{login}, {wire}{'Kafka ACLs on its znodes' if self.set_acl else 'open znodes'}"

    def login_failed(self, connect: str, failure: str) -> str:
        """The message of a start refused by ZooKeeper: `failure` is kazoo's error."""
        if self.username is None:
            return (f"ZooKeeper at {connect} requires SASL authentication ({failure}), and this broker "
                    f"has no ZooKeeper credentials: set {LOGIN_CONFIG} (broker key, or "
                    f"-D{LOGIN_CONFIG}=<path> in KAFKA_OPTS) to a JAAS file with a {self.section!r} "
                    f"section ({DIGEST_LOGIN_MODULE} username=... password=...)")
        return (f"ZooKeeper at {connect} refused the SASL DIGEST-MD5 login of principal "
                f"{self.principal} ({failure}): check username and password in section "
                f"{self.section!r} of the JAAS file {self.jaas_file} against the user_{self.username} "
                "of ZooKeeper's Server section")

    def tls_failed(self, connect: str, failure: str) -> str:
        """The message of a start whose TLS handshake with ZooKeeper failed."""
        return (f"ZooKeeper TLS handshake with {connect} failed ({failure}): check "
                "zookeeper.ssl.truststore.location (the CA of ZooKeeper's certificate), "
                "zookeeper.ssl.endpoint.identification.algorithm (the certificate must name the host of "
                "zookeeper.connect), zookeeper.ssl.keystore.location (ZooKeeper may require a client "
                "certificate, ssl.clientAuth) and that the port is ZooKeeper's secureClientPort")

    def kazoo_kwargs(self) -> dict[str, Any]:
        """KazooClient's arguments: SASL options, and for TLS a handler of its own per client."""
        kw: dict[str, Any] = {}
        if self.username is not None:
            kw["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": self.username,
                                  "password": self.password, "service": self.service}
        if self.tls is not None:
            kw.update(use_ssl=True, verify_certs=True, check_hostname=self.tls.check_hostname,
                      handler=self.tls.handler())
        return kw


class _SecureTransaction(TransactionRequest):
    def create(self, path, value=b"", acl=None, ephemeral=False, sequence=False):
        if acl is None:
            acl = znode_acl(path, self.client.secure)
        return super().create(path, value, acl, ephemeral, sequence)


class SecuredKazooClient(KazooClient):
    """A KazooClient whose creates without an explicit ACL get :func:`znode_acl` of their own
    path -- parents made by ``makepath``/``ensure_path`` included -- and whose SASL failure is
    kept (:attr:`sasl_failure`) and ends the session as AUTH_FAILED.

    kazoo passes its module's ``OPEN_ACL_UNSAFE`` list itself down to ``_create_async_inner``
    when no ACL was given (and the client has no ``default_acl``); that object is what is
    replaced here, so an explicit ACL, even an open one, is kept.  ZooKeeper 3.6+ requiring SASL
    answers a failed login with SESSIONCLOSEDREQUIRESASLAUTH, which kazoo 2.11's connection
    thread does not catch (it dies, and the client never connects): it is raised as
    AuthFailedError here, which kazoo handles (the session ends, calls fail at once)."""

    def __init__(self, *args, secure: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.secure = secure
        self.sasl_failure: str | None = None
        conn = self._connection
        inner = getattr(conn, "_authenticate_with_sasl", None)
        if inner is not None:
            def authenticate(host, timeout):
                try:
                    return inner(host, timeout)
                except ZookeeperError as e:
                    self.sasl_failure = f"{type(e).__name__}{': ' + str(e) if str(e) else ''}"
                    if isinstance(e, AuthFailedError):
                        raise
                    raise AuthFailedError(self.sasl_failure) from e
            conn._authenticate_with_sasl = authenticate

    @property
    def tls_failure(self) -> str | None:
        """The last failed TLS handshake with ZooKeeper (engine/cluster/zk_tls.py), None: none."""
        return getattr(self.handler, "tls_failure", None)

    def _create_async_inner(self, path, value, acl, flags, trailing=False, include_data=False):
        if acl is OPEN_ACL_UNSAFE:
            acl = znode_acl(path, self.secure)
        return super()._create_async_inner(path, value, acl, flags, trailing=trailing,
                                           include_data=include_data)

    def transaction(self):
        return _SecureTransaction(self)


def start_client(client: SecuredKazooClient, security: ZkClientSecurity, where: str, timeout_s: float) -> None:
    """Start `client` and prove its login with one read, so a refused login fails the start at
    once (:class:`ZooKeeperAuthError`) instead of leaving kazoo to retry for ever.  kazoo reports
    a session as connected before its SASL exchange; a failed exchange ends it (AUTH_FAILED) and
    calls then fail at once, and a ZooKeeper requiring SASL refuses the first call of a session
    without it (SESSIONCLOSEDREQUIRESASLAUTH).  A failed TLS handshake (a certificate not trusted,
    not naming the host) fails the start at once too (:class:`SslAuthenticationError`): kazoo
    would only retry it.  Not connected within `timeout_s`: kazoo's timeout error (the client
    stopped and closed)."""
    client.start_async()
    deadline = time.monotonic() + timeout_s
    try:
        while not client.connected and client.sasl_failure is None:
            if client.tls_failure is not None:
                raise SslAuthenticationError(security.tls_failed(where, client.tls_failure))
            if time.monotonic() >= deadline:
                raise client.handler.timeout_exception(f"Connection time-out ({timeout_s:.0f} s)")
            time.sleep(0.01)
        try:
            client.exists_async("/").get(timeout=max(1.0, deadline - time.monotonic()))
        except Exception as e:
            if client.sasl_failure is None and not isinstance(e, _REFUSED):
                raise               # not a login matter (connection lost, no answer)
            failure = client.sasl_failure or f"{type(e).__name__}{': ' + str(e) if str(e) else ''}"
            raise ZooKeeperAuthError(security.login_failed(where, failure)) from None
    except BaseException:
        client.stop()
        client.close()
        raise
