"""Real certificates for the TLS tests, made with ``cryptography``: a CA, a server certificate for
``localhost`` / 127.0.0.1 signed by it, a client certificate (``CN=alice,OU=eng,O=acme,C=US``) and
a second, unrelated CA with its own client, written out as Kafka's stores take them (PEM key +
chain in one file, encrypted PKCS#8, PKCS12)."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_PASSWORD = "key-secret"
STORE_PASSWORD = "store-secret"


def _name(**attrs: str) -> x509.Name:
    oids = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "CN": NameOID.COMMON_NAME, "EMAIL": NameOID.EMAIL_ADDRESS}
    # written C, O, OU, CN (the usual order in a certificate); RFC 2253 shows them reversed
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in attrs.items()])


@dataclass
class Issued:
    key: object
    cert: x509.Certificate
    chain: list[x509.Certificate] = field(default_factory=list)     # leaf first, CA last

    def key_pem(self, password: str | None = None) -> bytes:
        enc = (serialization.BestAvailableEncryption(password.encode()) if password
               else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)

    def chain_pem(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in self.chain)


def _issue(subject: x509.Name, key, issuer: Issued | None, *, ca: bool = False, sans=None, client=False,
           server_and_client: bool = False) -> Issued:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(issuer.cert.subject if issuer else subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                        critical=True)
    else:
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server_and_client
                  else [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH])
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    if issuer:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()), critical=False)
    cert = builder.sign(issuer.key if issuer else key, hashes.SHA256())
    return Issued(key, cert, [cert, *(issuer.chain if issuer else [])])


@dataclass
class Pki:
    """The certificates, and their files under ``root``."""

    root: str
    ca: Issued
    server: Issued
    client: Issued
    other_ca: Issued
    other_client: Issued

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)


def make_pki(root: str) -> Pki:
    ca = _issue(_name(C="US", O="acme", CN="acme test CA"), ec.generate_private_key(ec.SECP256R1()), None, ca=True)
    server = _issue(_name(C="US", O="acme", CN="localhost"),
                    rsa.generate_private_key(public_exponent=65537, key_size=2048), ca,
                    sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client = _issue(_name(C="US", O="acme", OU="eng", CN="alice"), ec.generate_private_key(ec.SECP256R1()), ca,
                    client=True)
    other_ca = _issue(_name(C="US", O="evil", CN="other CA"), ec.generate_private_key(ec.SECP256R1()), None,
                      ca=True)
    other_client = _issue(_name(C="US", O="evil", CN="mallory"), ec.generate_private_key(ec.SECP256R1()),
                          other_ca, client=True)
    pki = Pki(root, ca, server, client, other_ca, other_client)
    files = {
        "ca.pem": ca.chain_pem(),
        "other-ca.pem": other_ca.chain_pem(),
        "server.pem": server.key_pem() + server.chain_pem(),                    # key + chain, one file
        "server-encrypted.pem": server.key_pem(KEY_PASSWORD) + server.chain_pem(),
        "client.pem": client.key_pem() + client.chain_pem(),
        "other-client.pem": other_client.key_pem() + other_client.chain_pem(),
        "server.p12": pkcs12.serialize_key_and_certificates(
            b"server", server.key, server.cert, [ca.cert],
            serialization.BestAvailableEncryption(STORE_PASSWORD.encode())),
        "truststore.p12": pkcs12.serialize_key_and_certificates(
            None, None, None, [ca.cert], serialization.BestAvailableEncryption(STORE_PASSWORD.encode())),
    }
    for name, data in files.items():
        with open(pki.path(name), "wb") as f:
            f.write(data)
    return pki


def issue_pem(pki: Pki, name: str, cn: str, *, broker: bool = False) -> str:
    """One more certificate signed by ``pki``'s CA (``CN=<cn>,O=acme,C=US``, an EC key), written
    as ``<name>.pem`` (key + chain) under its root; returns the path.  ``broker``: a broker's
    certificate, for localhost / 127.0.0.1 and usable both ways (serverAuth and clientAuth): its
    listeners serve it and, over an SSL inter-broker listener, it is the broker's client
    certificate to the others (a serverAuth-only one is refused by a peer that requires one)."""
    sans = ([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            if broker else None)
    issued = _issue(_name(C="US", O="acme", CN=cn), ec.generate_private_key(ec.SECP256R1()), pki.ca,
                    sans=sans, client=not broker, server_and_client=broker)
    path = pki.path(f"{name}.pem")
    with open(path, "wb") as f:
        f.write(issued.key_pem() + issued.chain_pem())
    return path
