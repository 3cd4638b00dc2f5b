"""TLS contexts from Kafka's ``ssl.*`` keys.

The broker (or a client) builds its contexts once per listener::

    server = server_context(configs, "EXTERNAL")   # listener.name.external.ssl.* override ssl.*
    client = client_context(configs)               # inter-broker or tool side
    ...
    tls_sock = server.wrap_socket(sock, server_side=True)   # or an asyncio server with ssl=server

The principal of a TLS client (``ssl.principal.mapping.rules``) is ``ssl_principal``'s job.

Keys (Kafka 4.0's names and defaults; a ``listener.name.<l>.`` key overrides for that listener):

- Key store (the context's own certificate): ``ssl.keystore.type`` (default ``JKS`` as in Kafka;
  ``PEM`` and ``PKCS12`` are read, JKS is refused with :class:`~engine.errors.SslConfigError`
  naming the key) with ``ssl.keystore.location`` (PEM: one file with the private key and the
  certificate chain, leaf first) or, PEM only, inline ``ssl.keystore.key`` +
  ``ssl.keystore.certificate.chain``.  ``ssl.key.password`` decrypts an encrypted private key
  (PKCS#8); ``ssl.keystore.password`` opens a PKCS12 file and must not be set for PEM (Kafka's
  rule).  Unencrypted PKCS#8 and traditional (PKCS#1, SEC1) PEM keys are read as well.
- Trust store (the CAs a peer's certificate must chain to): ``ssl.truststore.type`` (default
  ``JKS``; ``PEM``, ``PKCS12``) with ``ssl.truststore.location`` or, PEM only, inline
  ``ssl.truststore.certificates``; ``ssl.truststore.password`` for PKCS12 only.  Without a trust
  store the system's CAs are used, as Kafka uses the JVM's.
- ``ssl.enabled.protocols`` (default ``TLSv1.2,TLSv1.3``) gives the lowest and highest version;
  anything below TLSv1.2 is refused.  ``ssl.protocol`` (default ``TLSv1.3``; ``TLSv1.2``,
  ``TLSv1.3``, ``TLS``) caps a *client's* highest version, as Kafka documents ("if this config is
  set to TLSv1.2, clients will not use TLSv1.3").
- ``ssl.cipher.suites`` (default: OpenSSL's): Java/IANA names (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``)
  are mapped to OpenSSL's (engine.security._tls_ciphers); OpenSSL names are taken as they are; an
  unknown or unsupported name is an error, as in Java.  TLS 1.3 suites
  (``TLS_AES_128_GCM_SHA256``, ...) are recognised, but Python's ``ssl`` cannot narrow the TLS 1.3
  list: whenever TLS 1.3 is enabled OpenSSL's TLS 1.3 defaults are offered (AES-256-GCM,
  ChaCha20-Poly1305, AES-128-GCM).  As in Java, a list without any TLS 1.3 suite disables TLS 1.3
  and one without any TLS 1.2 suite disables TLS 1.2.
- ``ssl.client.auth`` (server; default ``none``): ``required`` (a client without a certificate
  fails the handshake), ``requested`` (a certificate is checked if sent), ``none``.
- ``ssl.endpoint.identification.algorithm`` (client; default ``https``): ``https`` checks the
  server's certificate against the host name connected to, empty turns the check off.
- ``ssl.principal.mapping.rules`` (default ``DEFAULT``): see
  :class:`~engine.security.ssl_principal.SslPrincipalMapper`.

Java-only keys (``ssl.keymanager.algorithm``, ``ssl.trustmanager.algorithm``, ``ssl.provider``,
``ssl.secure.random.implementation``) are accepted and have no effect; ``ssl.engine.factory.class``
(a Java class) cannot be honoured and is refused.  Private keys are validated with
``cryptography`` (clear errors for a wrong or missing ``ssl.key.password``) and handed to
OpenSSL through a 0600 temporary file that holds them encrypted under a one-time password and
is removed at once (``SSLContext.load_cert_chain`` reads files only).
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from engine.errors import SslConfigError
from engine.security._tls_ciphers import IANA_TO_OPENSSL, TLS13_SUITES
from engine.security.listeners import listener_prefix

__all__ = ["DEFAULTS", "client_context", "server_context"]

DEFAULTS: dict[str, str] = {            # Kafka 4.0's defaults of the keys read here and in ssl_principal
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.keystore.type": "JKS",
    "ssl.truststore.type": "JKS",
    "ssl.client.auth": "none",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.principal.mapping.rules": "DEFAULT",
}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_TOO_OLD = ("SSL", "SSLv2", "SSLv2Hello", "SSLv3", "TLSv1", "TLSv1.1")
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


class _Conf:
    """The ``ssl.*`` values one context sees: ``listener.name.<l>.<key>`` over ``<key>`` over
    Kafka's default; :meth:`name` is the key a value came from (for error messages)."""

    def __init__(self, configs: Mapping[str, Any], listener: str | None,
                 names: Mapping[str, str] | None = None):
        self._configs = configs
        self._prefix = listener_prefix(listener) if listener else None
        self._names = names or {}

    def name(self, key: str) -> str:
        if self._prefix and self._prefix + key in self._configs:
            return self._prefix + key
        return key

    def get(self, key: str) -> Any:
        """The value, or Kafka's default (None if it has none); an explicit ``""`` stays ``""``."""
        value = self._configs.get(self.name(key))
        return DEFAULTS.get(key) if value is None else value

    def text(self, key: str) -> str | None:
        """The value as a stripped string, None where unset or empty (Kafka's null)."""
        value = self.get(key)
        if value is None:
            return None
        value = str(value).strip()
        return value or None

    def items(self, key: str) -> list[str]:
        value = self.get(key)
        if value is None:
            return []
        parts = value.split(",") if isinstance(value, str) else [str(v) for v in value]
        return [p.strip() for p in parts if p.strip()]

    def error(self, key: str, message: str) -> SslConfigError:
        return SslConfigError(self._names.get(key) or self.name(key), message)


def _read(conf: _Conf, key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise conf.error(key, f"cannot read {path}: {e.strerror or e}") from None


def _password(conf: _Conf, key: str) -> bytes | None:
    value = conf.text(key)
    return value.encode() if value is not None else None


# -- key store ------------------------------------------------------------------------------------

_PEM_KEY = re.compile(rb"-----BEGIN ((?:ENCRYPTED |RSA |EC |DSA )?PRIVATE KEY)-----.*?-----END \1-----", re.S)


def _pem_private_key(conf: _Conf, key_name: str, pem: bytes, where: str) -> Any:
    """The private key of a PEM text, decrypted with ``ssl.key.password`` (typed errors)."""
    blocks = [m.group(0) for m in _PEM_KEY.finditer(pem)]
    if len(blocks) != 1:
        raise conf.error(key_name, f"expected one PEM private key in {where}, found {len(blocks)}")
    password = _password(conf, "ssl.key.password")
    try:
        return serialization.load_pem_private_key(blocks[0], password)
    except TypeError:
        if password is None:
            raise conf.error("ssl.key.password", f"the private key in {where} is encrypted and "
                                                 "ssl.key.password is not set") from None
        raise conf.error("ssl.key.password", f"is set but the private key in {where} is not "
                                             "encrypted") from None
    except ValueError:
        if password is not None and blocks[0].startswith(b"-----BEGIN ENCRYPTED"):
            raise conf.error("ssl.key.password", f"does not decrypt the private key in {where}") from None
        raise conf.error(key_name, f"the private key in {where} cannot be read (PKCS#8 PEM expected)") from None


def _pem_certificates(conf: _Conf, key_name: str, pem: bytes, where: str) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError:
        certs = []
    if not certs:
        raise conf.error(key_name, f"no PEM certificate in {where}")
    return certs


def _key_store(conf: _Conf) -> tuple[Any, list[x509.Certificate], str] | None:
    """(private key, certificate chain, the key naming the store) of the configured key store,
    or None where none is configured."""
    store_type = (conf.text("ssl.keystore.type") or "JKS").upper()
    location = conf.text("ssl.keystore.location")
    inline_key = conf.text("ssl.keystore.key")
    store_password = conf.text("ssl.keystore.password")
    if inline_key is not None:
        if store_type != "PEM":
            raise conf.error("ssl.keystore.type", "SSL private key can be specified only for PEM, but key "
                                                  f"store type is {store_type}.")
        if location is not None:
            raise conf.error("ssl.keystore.key", "Both SSL key store location and separate private key "
                                                 "are specified.")
        chain = conf.text("ssl.keystore.certificate.chain")
        if chain is None:
            raise conf.error("ssl.keystore.certificate.chain", "SSL private key is specified, but certificate "
                                                               "chain is not specified.")
        if store_password is not None:
            raise conf.error("ssl.keystore.password", "SSL key store password cannot be specified with PEM "
                                                      "format, only key password may be specified.")
        key = _pem_private_key(conf, "ssl.keystore.key", inline_key.encode(), conf.name("ssl.keystore.key"))
        certs = _pem_certificates(conf, "ssl.keystore.certificate.chain", chain.encode(),
                                  conf.name("ssl.keystore.certificate.chain"))
        return key, certs, "ssl.keystore.key"
    if location is None:
        return None
    if store_type == "PEM":
        if store_password is not None:
            raise conf.error("ssl.keystore.password", "SSL key store password cannot be specified with PEM "
                                                      "format, only key password may be specified.")
        data = _read(conf, "ssl.keystore.location", location)
        key = _pem_private_key(conf, "ssl.keystore.location", data, location)
        return key, _pem_certificates(conf, "ssl.keystore.location", data, location), "ssl.keystore.location"
    if store_type == "PKCS12":
        data = _read(conf, "ssl.keystore.location", location)
        try:
            p12_key, cert, extra = pkcs12.load_key_and_certificates(data, _password(conf, "ssl.keystore.password"))
        except ValueError:
            raise conf.error("ssl.keystore.password", f"does not open the PKCS12 key store {location} "
                                                      "(wrong password, or not a PKCS12 file)") from None
        if p12_key is None or cert is None:
            raise conf.error("ssl.keystore.location", f"the PKCS12 key store {location} holds no private key "
                                                      "with its certificate")
        return p12_key, [cert, *extra], "ssl.keystore.location"
    raise conf.error("ssl.keystore.type", _unsupported_store(store_type, "ssl.keystore.location"))


def _unsupported_store(store_type: str, location_key: str) -> str:
    if store_type == "JKS":
        return (f"JKS stores cannot be read here (the default type, so set it when {location_key} is a PEM "
                "file); use PEM or PKCS12: keytool -importkeystore -deststoretype PKCS12 converts one")
    return f"unknown store type {store_type}: PEM and PKCS12 are supported"


def _load_key_store(conf: _Conf, ctx: ssl.SSLContext, store: tuple[Any, list[x509.Certificate], str]) -> None:
    """Hand the key and chain to OpenSSL: a 0600 temporary file holding the key encrypted under a
    one-time password, removed at once."""
    key, certs, key_name = store
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if (key.public_key().public_bytes(serialization.Encoding.DER, spki)
            != certs[0].public_key().public_bytes(serialization.Encoding.DER, spki)):
        raise conf.error(key_name, "the private key does not belong to the first certificate of the chain")
    one_time = secrets.token_urlsafe(32).encode()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(one_time))
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    fd, path = tempfile.mkstemp(prefix="engine-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=one_time)
    except ssl.SSLError as e:
        raise conf.error(key_name, f"OpenSSL refused the key or certificates: {e.reason or e}") from None
    finally:
        os.unlink(path)


# -- trust store ----------------------------------------------------------------------------------

def _trust_store(conf: _Conf) -> str | None:
    """The trusted CAs as PEM text, or None where no trust store is configured."""
    store_type = (conf.text("ssl.truststore.type") or "JKS").upper()
    location = conf.text("ssl.truststore.location")
    inline = conf.text("ssl.truststore.certificates")
    password = conf.text("ssl.truststore.password")
    if inline is not None:
        if store_type != "PEM":
            raise conf.error("ssl.truststore.type", "SSL trust store certs can be specified only for PEM, but "
                                                    f"trust store type is {store_type}.")
        if location is not None:
            raise conf.error("ssl.truststore.certificates", "Both SSL trust store location and separate trust "
                                                            "certificates are specified.")
        if password is not None:
            raise conf.error("ssl.truststore.password", "SSL trust store password cannot be specified for PEM "
                                                        "format.")
        certs = _pem_certificates(conf, "ssl.truststore.certificates", inline.encode(),
                                  conf.name("ssl.truststore.certificates"))
    elif location is None:
        return None
    elif store_type == "PEM":
        if password is not None:
            raise conf.error("ssl.truststore.password", "SSL trust store password cannot be specified for PEM "
                                                        "format.")
        certs = _pem_certificates(conf, "ssl.truststore.location", _read(conf, "ssl.truststore.location",
                                                                         location), location)
    elif store_type == "PKCS12":
        data = _read(conf, "ssl.truststore.location", location)
        try:
            p12 = pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
        except ValueError:
            raise conf.error("ssl.truststore.password", f"does not open the PKCS12 trust store {location} "
                                                        "(wrong password, or not a PKCS12 file)") from None
        certs = [c.certificate for c in p12.additional_certs]
        if p12.cert is not None:
            certs.append(p12.cert.certificate)
        if not certs:
            raise conf.error("ssl.truststore.location", f"no certificate in the PKCS12 trust store {location}")
    else:
        raise conf.error("ssl.truststore.type", _unsupported_store(store_type, "ssl.truststore.location"))
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _load_trust(conf: _Conf, ctx: ssl.SSLContext, purpose: ssl.Purpose) -> None:
    pem = _trust_store(conf)
    if pem is None:
        ctx.load_default_certs(purpose)
    else:
        ctx.load_verify_locations(cadata=pem)


# -- protocols and cipher suites ------------------------------------------------------------------

def _version(conf: _Conf, key: str, name: str) -> ssl.TLSVersion:
    if name in _VERSIONS:
        return _VERSIONS[name]
    if name in _TOO_OLD:
        raise conf.error(key, f"{name} is below TLSv1.2, the lowest version served")
    raise conf.error(key, f"unknown protocol {name!r}: TLSv1.2 and TLSv1.3 are supported")


def _protocols(conf: _Conf, client: bool) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    enabled = conf.items("ssl.enabled.protocols") or DEFAULTS["ssl.enabled.protocols"].split(",")
    versions = [_version(conf, "ssl.enabled.protocols", p) for p in enabled]
    lo, hi = min(versions), max(versions)
    protocol = conf.text("ssl.protocol") or DEFAULTS["ssl.protocol"]
    cap = ssl.TLSVersion.TLSv1_3 if protocol == "TLS" else _version(conf, "ssl.protocol", protocol)
    if client and cap < hi:
        hi = cap
        if hi < lo:
            raise conf.error("ssl.protocol", f"{protocol} is below every version of ssl.enabled.protocols")
    return lo, hi


def _ciphers(conf: _Conf, ctx: ssl.SSLContext, lo: ssl.TLSVersion,
             hi: ssl.TLSVersion) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """Apply ``ssl.cipher.suites``; the versions left usable by the suites named."""
    names = conf.items("ssl.cipher.suites")
    if not names:
        return lo, hi
    tls12: list[str] = []
    tls13: list[str] = []
    unknown: list[str] = []
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for name in names:
        if name in TLS13_SUITES:
            tls13.append(name)
            continue
        openssl_name = IANA_TO_OPENSSL.get(name, name)
        try:
            probe.set_ciphers(openssl_name)
        except ssl.SSLError:
            unknown.append(name)
            continue
        tls12.append(openssl_name)
    if unknown:
        raise conf.error("ssl.cipher.suites", f"unsupported cipher suite(s) {', '.join(unknown)} (Java/IANA "
                                              "names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, or "
                                              "OpenSSL's)")
    if tls12:
        ctx.set_ciphers(":".join(tls12))
    else:
        lo = max(lo, ssl.TLSVersion.TLSv1_3)
    if not tls13:
        hi = min(hi, ssl.TLSVersion.TLSv1_2)
    if hi < lo:
        raise conf.error("ssl.cipher.suites", "names no suite of the versions ssl.enabled.protocols enables")
    return lo, hi


def _base(conf: _Conf, purpose: int, client: bool) -> ssl.SSLContext:
    if conf.text("ssl.engine.factory.class") is not None:
        raise conf.error("ssl.engine.factory.class", "a Java SslEngineFactory cannot be used here; remove it")
    ctx = ssl.SSLContext(purpose)
    lo, hi = _protocols(conf, client)
    lo, hi = _ciphers(conf, ctx, lo, hi)
    ctx.minimum_version, ctx.maximum_version = lo, hi
    return ctx


def server_context(configs: Mapping[str, Any], listener: str | None = None) -> ssl.SSLContext:
    """The TLS server context of ``listener`` (SSL or SASL_SSL) from Kafka's keys (module doc).

    A key store is required; ``ssl.client.auth`` decides whether a client certificate is asked
    for, and the trust store is what it must chain to.  Raises
    :class:`~engine.errors.SslConfigError` naming the key at fault."""
    conf = _Conf(configs, listener)
    auth = (conf.text("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise conf.error("ssl.client.auth", f"Invalid value {auth} for configuration ssl.client.auth: String "
                                            "must be one of: required, requested, none")
    ctx = _base(conf, ssl.PROTOCOL_TLS_SERVER, client=False)
    store = _key_store(conf)
    if store is None:
        raise conf.error("ssl.keystore.location", "a TLS listener needs a key store: ssl.keystore.location, "
                                                  "or ssl.keystore.key and ssl.keystore.certificate.chain")
    _load_key_store(conf, ctx, store)
    ctx.verify_mode = _CLIENT_AUTH[auth]
    trusted = _trust_store(conf)            # read (and checked) whether or not it is used, as Kafka does
    if trusted is not None:
        ctx.load_verify_locations(cadata=trusted)
    elif auth != "none":
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(configs: Mapping[str, Any], listener: str | None = None, *,
                   names: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """The TLS client context from Kafka's keys (module doc): the server's certificate must chain
    to the trust store and, with ``ssl.endpoint.identification.algorithm=https``, name the host;
    a key store, where configured, is the client's certificate (mutual TLS).  ``names``: the key
    an error names instead of an ``ssl.*`` key, for settings that came under other names (the
    ZooKeeper client's ``zookeeper.ssl.*``: engine/cluster/zk_tls.py)."""
    conf = _Conf(configs, listener, names)
    algorithm = conf.get("ssl.endpoint.identification.algorithm")
    algorithm = "" if algorithm is None else str(algorithm).strip().lower()
    if algorithm not in ("https", ""):
        raise conf.error("ssl.endpoint.identification.algorithm", f"{algorithm!r} is not supported: https "
                                                                  "(check the host name) or empty (do not)")
    ctx = _base(conf, ssl.PROTOCOL_TLS_CLIENT, client=True)
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_trust(conf, ctx, ssl.Purpose.SERVER_AUTH)
    store = _key_store(conf)
    if store is not None:
        _load_key_store(conf, ctx, store)
    return ctx
