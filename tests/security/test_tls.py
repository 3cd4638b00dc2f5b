"""engine.security.tls: TLS contexts built from Kafka-style ``ssl.*`` dicts, checked by real
handshakes over loopback sockets between them (certificates made in the test, tests/security/certs.py),
and the principal a client certificate maps to."""

from __future__ import annotations

import socket
import ssl
import threading
from dataclasses import dataclass

import pytest

from engine.errors import InvalidConfigError, SslConfigError
from engine.security.ssl_principal import SslPrincipalMapper
from engine.security.tls import client_context, server_context
from tests.security.certs import KEY_PASSWORD, STORE_PASSWORD, Pki, make_pki

ALICE_DN = "CN=alice,OU=eng,O=acme,C=US"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def server_configs(pki: Pki, **extra) -> dict:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"), **extra}


def client_configs(pki: Pki, cert: str | None = "client.pem", **extra) -> dict:
    out = {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"), **extra}
    if cert:
        out.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path(cert)})
    return out


@dataclass
class Result:
    server_error: BaseException | None = None
    client_error: BaseException | None = None
    version: str | None = None
    cipher: str | None = None
    principal: str | None = None

    @property
    def ok(self) -> bool:
        return self.server_error is None and self.client_error is None


def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, server_hostname: str = "localhost",
              mapper: SslPrincipalMapper | None = None) -> Result:
    """One connection over 127.0.0.1: TLS handshake, a ping and its echo; what each side saw."""
    res = Result()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(10)
    port = listener.getsockname()[1]

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            conn.settimeout(10)
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                res.principal = (mapper or SslPrincipalMapper()).principal(tls.getpeercert(binary_form=True))
                tls.sendall(b"pong:" + tls.recv(5))
        except Exception as e:          # what the server saw is part of the result
            res.server_error = e

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                client_ctx.wrap_socket(raw, server_hostname=server_hostname) as tls:
            res.version, res.cipher = tls.version(), tls.cipher()[0]
            tls.sendall(b"ping!")
            if tls.recv(100) != b"pong:ping!":    # TLS 1.3: a refused client certificate shows here
                raise ConnectionError("no answer from the server")
    except Exception as e:
        res.client_error = e
    thread.join(15)
    listener.close()
    assert not thread.is_alive()
    return res


# -- client authentication ------------------------------------------------------------------------

def test_required_client_auth(pki):
    server = server_context(server_configs(pki, **{"ssl.client.auth": "required"}))
    res = handshake(server, client_context(client_configs(pki)))
    assert res.ok, res
    assert res.principal == f"User:{ALICE_DN}" and res.version == "TLSv1.3"
    refused = handshake(server, client_context(client_configs(pki, cert=None)))
    assert isinstance(refused.server_error, ssl.SSLError), refused
    assert "certificate" in str(refused.server_error).lower()
    assert refused.client_error is not None and refused.principal is None


def test_required_client_auth_refuses_a_certificate_of_another_ca(pki):
    server = server_context(server_configs(pki, **{"ssl.client.auth": "required"}))
    res = handshake(server, client_context(client_configs(pki, cert="other-client.pem")))
    assert isinstance(res.server_error, ssl.SSLCertVerificationError), res
    assert res.principal is None


def test_requested_client_auth(pki):
    server = server_context(server_configs(pki, **{"ssl.client.auth": "requested"}))
    without = handshake(server, client_context(client_configs(pki, cert=None)))
    assert without.ok and without.principal == "User:ANONYMOUS", without
    with_cert = handshake(server, client_context(client_configs(pki)))
    assert with_cert.ok and with_cert.principal == f"User:{ALICE_DN}", with_cert
    # a certificate sent is still checked
    other = handshake(server, client_context(client_configs(pki, cert="other-client.pem")))
    assert isinstance(other.server_error, ssl.SSLCertVerificationError), other


def test_no_client_auth_is_kafkas_default(pki):
    server = server_context(server_configs(pki))            # ssl.client.auth unset: none
    res = handshake(server, client_context(client_configs(pki)))
    assert res.ok and res.principal == "User:ANONYMOUS", res


def test_per_listener_client_auth(pki):
    configs = server_configs(pki, **{"listener.name.external.ssl.client.auth": "required"})
    internal = handshake(server_context(configs, "INTERNAL"), client_context(client_configs(pki, cert=None)))
    assert internal.ok, internal
    external = handshake(server_context(configs, "EXTERNAL"), client_context(client_configs(pki, cert=None)))
    assert external.server_error is not None, external
    with pytest.raises(SslConfigError) as e:
        server_context({**configs, "listener.name.external.ssl.client.auth": "always"}, "EXTERNAL")
    assert e.value.key == "listener.name.external.ssl.client.auth"
    assert "String must be one of: required, requested, none" in str(e.value)


# -- key stores -----------------------------------------------------------------------------------

def test_encrypted_key_with_ssl_key_password(pki):
    configs = server_configs(pki, **{"ssl.keystore.location": pki.path("server-encrypted.pem"),
                                     "ssl.key.password": KEY_PASSWORD})
    assert handshake(server_context(configs), client_context(client_configs(pki))).ok
    with pytest.raises(SslConfigError) as e:
        server_context({**configs, "ssl.key.password": "wrong"})
    assert e.value.key == "ssl.key.password" and "does not decrypt" in str(e.value)
    assert "wrong" not in str(e.value) and KEY_PASSWORD not in str(e.value)
    missing = dict(configs)
    del missing["ssl.key.password"]
    with pytest.raises(SslConfigError) as e:
        server_context(missing)
    assert e.value.key == "ssl.key.password" and "is encrypted" in str(e.value)
    with pytest.raises(SslConfigError) as e:
        server_context(server_configs(pki, **{"ssl.key.password": KEY_PASSWORD}))     # key not encrypted
    assert e.value.key == "ssl.key.password"


def test_inline_pem_key_chain_and_trusted_certificates(pki):
    server = server_context({"ssl.keystore.type": "PEM",
                             "ssl.keystore.key": pki.server.key_pem(KEY_PASSWORD).decode(),
                             "ssl.key.password": KEY_PASSWORD,
                             "ssl.keystore.certificate.chain": pki.server.chain_pem().decode(),
                             "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca.chain_pem().decode(),
                             "ssl.client.auth": "required"})
    client = client_context({"ssl.keystore.type": "PEM", "ssl.keystore.key": pki.client.key_pem().decode(),
                             "ssl.keystore.certificate.chain": pki.client.chain_pem().decode(),
                             "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca.chain_pem().decode()})
    res = handshake(server, client)
    assert res.ok and res.principal == f"User:{ALICE_DN}", res


def test_pkcs12_key_store_and_trust_store(pki):
    server = server_context({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("server.p12"),
                             "ssl.keystore.password": STORE_PASSWORD})
    client = client_context({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": pki.path("truststore.p12"),
                             "ssl.truststore.password": STORE_PASSWORD})
    assert handshake(server, client).ok
    with pytest.raises(SslConfigError) as e:
        server_context({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("server.p12"),
                        "ssl.keystore.password": "nope"})
    assert e.value.key == "ssl.keystore.password"


@pytest.mark.parametrize("extra,key,text", [
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type", "JKS stores cannot be read here"),
    ({"ssl.keystore.type": None}, "ssl.keystore.type", "JKS stores cannot be read here"),   # Kafka's default
    ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type", "JKS"),
    ({"ssl.keystore.type": "BCFKS"}, "ssl.keystore.type", "unknown store type BCFKS"),
    ({"ssl.keystore.password": "x"}, "ssl.keystore.password",
     "SSL key store password cannot be specified with PEM format"),
    ({"ssl.truststore.password": "x"}, "ssl.truststore.password",
     "SSL trust store password cannot be specified for PEM format."),
    ({"ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"}, "ssl.keystore.key",
     "Both SSL key store location and separate private key are specified."),
    ({"ssl.truststore.certificates": "x"}, "ssl.truststore.certificates",
     "Both SSL trust store location and separate trust certificates are specified."),
    ({"ssl.keystore.location": "/nonexistent/k.pem"}, "ssl.keystore.location", "cannot read /nonexistent/k.pem"),
    ({"ssl.truststore.location": "/nonexistent/ca.pem"}, "ssl.truststore.location", "cannot read"),
    ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "ssl.enabled.protocols", "TLSv1.1 is below TLSv1.2"),
    ({"ssl.enabled.protocols": "TLSv9"}, "ssl.enabled.protocols", "unknown protocol"),
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol", "below TLSv1.2"),
    ({"ssl.cipher.suites": "TLS_FOO_WITH_BAR"}, "ssl.cipher.suites", "unsupported cipher suite(s) TLS_FOO_WITH_BAR"),
    ({"ssl.enabled.protocols": "TLSv1.3", "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
     "ssl.cipher.suites", "names no suite of the versions"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth", "String must be one of"),
    ({"ssl.engine.factory.class": "com.example.Factory"}, "ssl.engine.factory.class", "Java"),
])
def test_server_config_errors_name_the_key(pki, extra, key, text):
    configs = {k: v for k, v in {**server_configs(pki), **extra}.items() if v is not None}
    with pytest.raises(SslConfigError) as e:
        server_context(configs)
    assert e.value.key == key and text in str(e.value), str(e.value)
    assert isinstance(e.value, InvalidConfigError)


def test_key_store_errors(pki, tmp_path):
    with pytest.raises(SslConfigError, match="needs a key store"):
        server_context({})
    with pytest.raises(SslConfigError) as e:
        server_context({"ssl.keystore.type": "PEM", "ssl.keystore.key": pki.server.key_pem().decode()})
    assert e.value.key == "ssl.keystore.certificate.chain"
    with pytest.raises(SslConfigError) as e:           # the client's key with the server's chain
        server_context({"ssl.keystore.type": "PEM", "ssl.keystore.key": pki.client.key_pem().decode(),
                        "ssl.keystore.certificate.chain": pki.server.chain_pem().decode()})
    assert e.value.key == "ssl.keystore.key" and "does not belong" in str(e.value)
    only_certs = tmp_path / "certs-only.pem"
    only_certs.write_bytes(pki.server.chain_pem())
    with pytest.raises(SslConfigError, match="expected one PEM private key"):
        server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(only_certs)})


# -- protocols and cipher suites ------------------------------------------------------------------

def test_tls12_only_and_tls13(pki):
    tls12 = server_context(server_configs(pki, **{"ssl.enabled.protocols": "TLSv1.2"}))
    assert handshake(tls12, client_context(client_configs(pki))).version == "TLSv1.2"
    default = server_context(server_configs(pki))
    assert handshake(default, client_context(client_configs(pki))).version == "TLSv1.3"
    # ssl.protocol=TLSv1.2 keeps a client at TLS 1.2 (Kafka's documented meaning)
    capped = client_context(client_configs(pki, **{"ssl.protocol": "TLSv1.2"}))
    assert handshake(default, capped).version == "TLSv1.2"
    tls13 = server_context(server_configs(pki, **{"ssl.enabled.protocols": "TLSv1.3"}))
    res = handshake(tls13, client_context(client_configs(pki, **{"ssl.enabled.protocols": "TLSv1.2"})))
    assert res.server_error is not None and res.client_error is not None


def test_cipher_suites_by_java_name(pki):
    server = server_context(server_configs(pki, **{
        "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}))
    client = client_context(client_configs(pki, **{"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}))
    res = handshake(server, client)
    # no TLS 1.3 suite named: TLS 1.3 is off, as in Java
    assert res.ok and (res.version, res.cipher) == ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"), res
    only13 = server_context(server_configs(pki, **{"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}))
    assert handshake(only13, client_context(client_configs(pki))).version == "TLSv1.3"
    res = handshake(only13, client_context(client_configs(pki, **{"ssl.enabled.protocols": "TLSv1.2"})))
    assert not res.ok


# -- the server's identity ------------------------------------------------------------------------

def test_hostname_verification(pki):
    server = server_context(server_configs(pki))
    assert handshake(server, client_context(client_configs(pki)), server_hostname="127.0.0.1").ok
    wrong = handshake(server, client_context(client_configs(pki)), server_hostname="wrong.example")
    assert isinstance(wrong.client_error, ssl.SSLCertVerificationError), wrong
    assert "wrong.example" in str(wrong.client_error) or "match" in str(wrong.client_error)
    # ssl.endpoint.identification.algorithm= (empty) turns the name check off, not the chain check
    no_check = client_context(client_configs(pki, **{"ssl.endpoint.identification.algorithm": ""}))
    assert handshake(server, no_check, server_hostname="wrong.example").ok
    untrusted = client_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("other-ca.pem"),
                                "ssl.endpoint.identification.algorithm": ""})
    assert isinstance(handshake(server, untrusted).client_error, ssl.SSLCertVerificationError)
    with pytest.raises(SslConfigError) as e:
        client_context(client_configs(pki, **{"ssl.endpoint.identification.algorithm": "ldaps"}))
    assert e.value.key == "ssl.endpoint.identification.algorithm"


def test_principal_mapping_rules_over_a_handshake(pki):
    server = server_context(server_configs(pki, **{"ssl.client.auth": "required"}))
    mapper = SslPrincipalMapper.from_configs(
        {"listener.name.external.ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=eng,.*$/$1@eng/U,DEFAULT"},
        "EXTERNAL")
    res = handshake(server, client_context(client_configs(pki)), mapper=mapper)
    assert res.ok and res.principal == "User:ALICE@ENG", res
