"""The SCRAM client (engine/security/scram_client.py): RFC 7677's SCRAM-SHA-256 example exactly,
an exchange with our ScramServer for both mechanisms, and the server answers it must refuse."""

from __future__ import annotations

import base64
import secrets

import pytest

from engine.errors import IllegalSaslStateError, SaslAuthenticationError
from engine.security.scram import ScramCredential, ScramServer
from engine.security.scram_client import ScramClient


def test_rfc7677_example():
    c = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert c.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = c.final_message(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    c.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    assert c.complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_exchange_with_our_server(mechanism):
    cred = ScramCredential.from_password(mechanism, "s3cret")
    server = ScramServer(mechanism, lambda u: cred if u == "al,i=ce" else None, fake_secret=secrets.token_bytes(16))
    client = ScramClient(mechanism, "al,i=ce", "s3cret")
    client.verify(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    assert client.complete and server.complete and server.authorization_id == "al,i=ce"


def test_wrong_password_fails_at_the_server():
    cred = ScramCredential.from_password("SCRAM-SHA-512", "right")
    server = ScramServer("SCRAM-SHA-512", lambda u: cred, fake_secret=secrets.token_bytes(16))
    client = ScramClient("SCRAM-SHA-512", "u", "wrong")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(client.final_message(server.evaluate(client.first_message())))


def _first(c: ScramClient) -> str:
    return c.first_message().decode().split("r=", 1)[1]


def test_refused_server_answers():
    salt = base64.b64encode(b"salt").decode()
    c = ScramClient("SCRAM-SHA-256", "u", "p")
    nonce = _first(c)
    with pytest.raises(SaslAuthenticationError, match="nonce"):
        c.final_message(f"r=other{nonce},s={salt},i=4096".encode())
    c = ScramClient("SCRAM-SHA-256", "u", "p")
    nonce = _first(c)
    with pytest.raises(SaslAuthenticationError, match="iterations"):
        c.final_message(f"r={nonce}x,s={salt},i=100".encode())
    c = ScramClient("SCRAM-SHA-256", "u", "p")
    _first(c)
    with pytest.raises(SaslAuthenticationError, match="other-error"):
        c.final_message(b"e=other-error")
    c = ScramClient("SCRAM-SHA-256", "u", "p")
    nonce = _first(c)
    c.final_message(f"r={nonce}x,s={salt},i=4096".encode())
    with pytest.raises(SaslAuthenticationError, match="signature"):   # a server without the credential
        c.verify(b"v=" + base64.b64encode(b"\0" * 32))
    with pytest.raises(IllegalSaslStateError):
        c.first_message()
