"""SCRAM-SHA-256/512 server exchange: RFC 7677's published vector, kafka-python's and
aiokafka's SCRAM clients as the peer (independent code), and each bad input failing."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from aiokafka.conn import ScramAuthenticator
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient

from engine.errors import IllegalSaslStateError, SaslAuthenticationError, ScramCredentialFormatError
from engine.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramServer,
    escape_username,
    salted_password,
    unescape_username,
)

MECHS = [SCRAM_SHA_256, SCRAM_SHA_512]
GENERIC = "Authentication failed during authentication due to invalid credentials"

# RFC 7677 section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def server(creds: dict, mech: str = SCRAM_SHA_256, nonce=None, secret=b"k" * 32) -> ScramServer:
    return ScramServer(mech, creds.get, fake_secret=secret, nonce=nonce)


def rfc_server() -> ScramServer:
    cred = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)
    return server({"user": cred}, nonce=lambda: RFC_SERVER_NONCE)


def test_rfc7677_vector():
    s = rfc_server()
    assert s.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not s.complete
    assert s.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert s.complete and s.authorization_id == "user" and s.principal == "User:user"


def test_credential_never_holds_the_password_and_matches_salted_form():
    cred = ScramCredential.from_password(SCRAM_SHA_512, "pencil", 4096, RFC_SALT)
    salted = salted_password(SCRAM_SHA_512, "pencil", RFC_SALT, 4096)
    assert cred == ScramCredential.from_salted_password(SCRAM_SHA_512, RFC_SALT, salted, 4096)
    assert b"pencil" not in cred.salt + cred.stored_key + cred.server_key
    assert len(cred.stored_key) == len(cred.server_key) == 64
    assert "pencil" not in repr(cred) and base64.b64encode(cred.stored_key).decode() not in repr(cred)
    assert len(ScramCredential.from_password(SCRAM_SHA_256, "p").salt) == 32


def test_kafka_string_form_round_trip():
    cred = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)
    text = cred.to_kafka_string()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert ",server_key=" in text and text.endswith(",iterations=4096")
    assert ScramCredential.from_kafka_string(text) == cred
    reordered = ",".join(reversed(text.split(",")))
    assert ScramCredential.from_kafka_string(reordered) == cred


@pytest.mark.parametrize("bad", [
    "", "salt=AAAA", "salt=AAAA,stored_key=AAAA,server_key=AAAA",
    "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096,extra=1",
    "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=many",
    "salt=A!AA,stored_key=AAAA,server_key=AAAA,iterations=4096",
    "salt,stored_key=AAAA,server_key=AAAA,iterations=4096",
])
def test_kafka_string_form_rejects_malformed(bad):
    with pytest.raises(ScramCredentialFormatError):
        ScramCredential.from_kafka_string(bad)


def _drive_aiokafka(srv: ScramServer, user: str, password: str, mech: str) -> None:
    client = ScramAuthenticator(loop=None, sasl_plain_password=password,
                                sasl_plain_username=user, sasl_mechanism=mech)
    gen = client._authenticator
    token, _ = next(gen)
    token, _ = gen.send(srv.evaluate(token))
    final = srv.evaluate(token)
    with pytest.raises(StopIteration):        # the client checks the server's signature
        gen.send(final)


def _drive_kafka_python(srv: ScramServer, user: str, password: str, mech: str) -> None:
    client = ScramClient(user, password, mech)
    client.process_server_first_message(srv.evaluate(client.first_message()))
    client.process_server_final_message(srv.evaluate(client.final_message()))


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize("drive", [_drive_aiokafka, _drive_kafka_python])
def test_real_clients_authenticate(mech, drive):
    creds = {"alice": ScramCredential.from_password(mech, "alice-secret", 4096)}
    srv = server(creds, mech)
    drive(srv, "alice", "alice-secret", mech)
    assert srv.complete and srv.principal == "User:alice" and srv.failure is None


@pytest.mark.parametrize("mech", MECHS)
def test_escaped_username_from_aiokafka(mech):
    user = "svc,a=b"
    srv = server({user: ScramCredential.from_password(mech, "pw", 8192)}, mech)
    _drive_aiokafka(srv, user, "pw", mech)
    assert srv.authorization_id == user


def test_escaping():
    assert escape_username("a,b=c") == "a=2Cb=3Dc"
    assert unescape_username("a=2Cb=3Dc") == "a,b=c"
    for bad in ("a=b", "a=2D", "a="):
        with pytest.raises(ValueError):
            unescape_username(bad)


@pytest.mark.parametrize("drive", [_drive_aiokafka, _drive_kafka_python])
def test_wrong_password_fails_with_kafka_message(drive):
    srv = server({"alice": ScramCredential.from_password(SCRAM_SHA_256, "right", 4096)})
    with pytest.raises(SaslAuthenticationError) as e:
        drive(srv, "alice", "wrong", SCRAM_SHA_256)
    assert str(e.value) == GENERIC + " with SASL mechanism SCRAM-SHA-256"
    assert e.value.code == 58 and srv.failure == "invalid client proof" and not srv.complete
    with pytest.raises(IllegalSaslStateError):
        srv.evaluate(b"c=biws,r=x,p=AAAA")


def test_unknown_user_looks_like_a_known_one_until_the_proof():
    real = ScramCredential.from_password(SCRAM_SHA_256, "pw", 4096)
    creds = {"alice": real}
    answers = {}
    for user in ("alice", "mallory"):
        srv = server(creds)
        first = srv.evaluate(f"n,,n={user},r=abc".encode()).decode()
        parts = dict(p.split("=", 1) for p in first.split(","))
        answers[user] = parts
        client = ScramClient(user, "guess", SCRAM_SHA_256)
        client.nonce = b"abc"
        client.auth_message = f"n={user},r=abc".encode()
        client.process_server_first_message(first.encode())
        with pytest.raises(SaslAuthenticationError) as e:
            srv.evaluate(client.final_message())
        assert str(e.value) == GENERIC + " with SASL mechanism SCRAM-SHA-256"
    assert answers["alice"]["i"] == answers["mallory"]["i"] == "4096"
    assert len(base64.b64decode(answers["mallory"]["s"])) == len(real.salt)
    # the fake salt is the same on every try for one user, and differs between users
    again = server(creds).evaluate(b"n,,n=mallory,r=abc").decode()
    assert dict(p.split("=", 1) for p in again.split(","))["s"] == answers["mallory"]["s"]
    other = server(creds).evaluate(b"n,,n=eve,r=abc").decode()
    assert dict(p.split("=", 1) for p in other.split(","))["s"] != answers["mallory"]["s"]


def test_unknown_user_fails_even_with_a_proof_from_the_fake_salt():
    """The fake keys are not derived from any password, so no proof can match them."""
    srv = server({})
    first = srv.evaluate(b"n,,n=ghost,r=abc")
    client = ScramClient("ghost", "", SCRAM_SHA_256)
    client.nonce, client.auth_message = b"abc", b"n=ghost,r=abc"
    client.process_server_first_message(first)
    with pytest.raises(SaslAuthenticationError):
        srv.evaluate(client.final_message())
    assert srv.failure == "unknown user"


def test_wrong_nonce_in_client_final():
    srv = rfc_server()
    srv.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError):
        srv.evaluate(RFC_CLIENT_FINAL.replace(b"r=rOpr", b"r=xOpr"))
    assert "nonce" in (srv.failure or "")


def test_replayed_proof_fails_on_a_new_exchange():
    """A captured client-final is worthless in another exchange: the server nonce differs."""
    srv = server({"user": ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)})
    srv.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError):
        srv.evaluate(RFC_CLIENT_FINAL)
    # and a replay into a completed exchange is out of turn
    done = rfc_server()
    done.evaluate(RFC_CLIENT_FIRST)
    done.evaluate(RFC_CLIENT_FINAL)
    with pytest.raises(IllegalSaslStateError):
        done.evaluate(RFC_CLIENT_FINAL)


def test_tampered_proof_and_channel_binding():
    for tampered in (RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"),
                     RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),          # "y,,"
                     RFC_CLIENT_FINAL[:-8] + b"AAAAAAA=",
                     RFC_CLIENT_FINAL.replace(b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                                              b"p=AAAA")):                      # short proof
        srv = rfc_server()
        srv.evaluate(RFC_CLIENT_FIRST)
        with pytest.raises(SaslAuthenticationError):
            srv.evaluate(tampered)


@pytest.mark.parametrize("first", [
    b"", b"n,,", b"y,,n=user,r=abc", b"p=tls-server-end-point,,n=user,r=abc",
    b"n,,n=user", b"n,,r=abc,n=user", b"n,,n=,r=abc", b"n,,n=user,r=",
    b"n,,m=ext,n=user,r=abc", b"n,,n=us=er,r=abc", b"n,,n=user,r=a,c", b"\xff\xfe",
    b"n,,n=user,r=abc,tokenauth=true", b"n,,n=user,r=abc,tokenauth=TRUE",
])
def test_bad_client_first(first):
    srv = server({"user": ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096)})
    with pytest.raises(SaslAuthenticationError):
        srv.evaluate(first)
    assert not srv.complete
    with pytest.raises(IllegalSaslStateError):
        srv.evaluate(RFC_CLIENT_FIRST)


@pytest.mark.parametrize("final", [b"", b"c=biws", b"c=biws,r=x", b"p=AAAA", b"\xff",
                                   RFC_CLIENT_FINAL + b",x=1", RFC_CLIENT_FINAL[:-1]])
def test_bad_or_truncated_client_final(final):
    srv = rfc_server()
    srv.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError):
        srv.evaluate(final)


def _client_final(mech, password, salt, iterations, gs2, bare, server_first):
    """A by-the-RFC client final message (for the cases the real clients cannot send)."""
    name = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}[mech]
    nonce = dict(p.split("=", 1) for p in server_first.split(","))["r"]
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={nonce}"
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored = hashlib.new(name, client_key).digest()
    sig = hmac.new(stored, f"{bare},{server_first},{without_proof}".encode(), name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("gs2,ok", [("n,,", True), ("n,a=user,", True), ("n,a=other,", False)])
def test_authzid_must_be_empty_or_the_user(gs2, ok):
    cred = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)
    srv = server({"user": cred})
    bare = "n=user,r=abc,ext=ignored"          # an unknown extension is ignored, as in Kafka
    if not ok:
        with pytest.raises(SaslAuthenticationError) as e:
            srv.evaluate((gs2 + bare).encode())
        assert "authorization id" in str(e.value)
        return
    first = srv.evaluate((gs2 + bare).encode()).decode()
    srv.evaluate(_client_final(SCRAM_SHA_256, "pencil", RFC_SALT, 4096, gs2, bare, first))
    assert srv.principal == "User:user"


def test_credential_under_minimum_iterations_is_refused():
    weak = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 1024, RFC_SALT)
    srv = server({"user": weak})
    with pytest.raises(SaslAuthenticationError):
        srv.evaluate(RFC_CLIENT_FIRST)
    assert "iterations" in (srv.failure or "")


def test_broken_lookup_fails_the_login():
    def lookup(user):
        raise OSError("store unreadable")
    srv = ScramServer(SCRAM_SHA_256, lookup, fake_secret=b"k")
    with pytest.raises(SaslAuthenticationError):
        srv.evaluate(RFC_CLIENT_FIRST)


def test_not_complete_has_no_principal():
    srv = rfc_server()
    with pytest.raises(IllegalSaslStateError):
        _ = srv.principal
    with pytest.raises(ValueError):
        ScramServer("SCRAM-SHA-1", {}.get, fake_secret=b"k")


@settings(max_examples=300, deadline=None)
@given(first=st.binary(max_size=200), final=st.binary(max_size=200))
def test_any_bytes_fail_cleanly(first, final):
    """Random or mangled tokens end in one of the two SASL errors, never anything else."""
    srv = server({"user": ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)})
    for token in (first, final):
        try:
            srv.evaluate(token)
        except (SaslAuthenticationError, IllegalSaslStateError):
            pass
    assert not srv.complete


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, len(RFC_CLIENT_FINAL) - 1), flip=st.integers(0, 255))
def test_mangled_client_final_never_authenticates(cut, flip):
    srv = rfc_server()
    srv.evaluate(RFC_CLIENT_FIRST)
    mangled = bytearray(RFC_CLIENT_FINAL)
    mangled[cut] ^= flip or 1
    with pytest.raises(SaslAuthenticationError):
        srv.evaluate(bytes(mangled))
