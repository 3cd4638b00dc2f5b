"""SCRAM credential store: Kafka's Alter/DescribeUserScramCredentials rules, persistence across
reopen with atomic replace, and ZooKeeper's /config/users form."""

from __future__ import annotations

import json
import os
import stat

import pytest
from aiokafka.conn import ScramAuthenticator
from kafka.admin._users import UserScramCredentialDeletion, UserScramCredentialUpsertion

from engine.errors import (
    ErrorCode,
    ResourceNotFoundError,
    ScramCredentialFormatError,
    UnacceptableCredentialError,
)
from engine.security.credentials import (
    AlterResult,
    CredentialInfo,
    ScramCredentialStore,
    ScramDeletion,
    ScramUpsertion,
    decode_zk_user_config,
    describe_credentials,
    encode_zk_user_config,
    plan_alter,
    sanitize_user,
    zk_change_notification,
    zk_user_path,
)
from engine.security.scram import ScramCredential, ScramServer

SHA256, SHA512 = 1, 2


def upsert(user, mech=SHA256, password="pw", iterations=4096):
    """An upsertion as kafka-python's admin client builds it (it salts on the client side)."""
    u = UserScramCredentialUpsertion(user, mech, password, iterations=iterations)
    return ScramUpsertion(u.user, int(u.mechanism), u.iterations, u.salt, u.salted_password)


def delete(user, mech=SHA256):
    d = UserScramCredentialDeletion(user, mech)
    return ScramDeletion(d.user, int(d.mechanism))


def login(store, user, password, mech="SCRAM-SHA-256") -> bool:
    srv = ScramServer(mech, lambda u: store(u, mech), fake_secret=b"s")
    client = ScramAuthenticator(loop=None, sasl_plain_password=password,
                                sasl_plain_username=user, sasl_mechanism=mech)
    gen = client._authenticator
    try:
        token, _ = next(gen)
        token, _ = gen.send(srv.evaluate(token))
        gen.send(srv.evaluate(token))
    except StopIteration:
        return srv.complete
    except Exception:
        return False
    return False


def test_alter_then_login_then_reopen(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    results = store.alter([], [upsert("alice", SHA256, "a-pw"), upsert("bob", SHA512, "b-pw", 8192)])
    assert results == [AlterResult("alice"), AlterResult("bob")]
    assert login(store, "alice", "a-pw") and not login(store, "alice", "nope")
    assert login(store, "bob", "b-pw", "SCRAM-SHA-512")

    reopened = ScramCredentialStore(str(tmp_path))
    assert reopened.snapshot() == store.snapshot()
    assert login(reopened, "bob", "b-pw", "SCRAM-SHA-512")
    assert stat.S_IMODE(os.stat(reopened.path).st_mode) == 0o600
    doc = json.loads(open(reopened.path).read())
    assert doc["version"] == 1
    assert doc["users"]["bob"]["SCRAM-SHA-512"].endswith(",iterations=8192")
    assert "b-pw" not in open(reopened.path).read()

    assert reopened.alter([delete("bob", SHA512)], []) == [AlterResult("bob")]
    assert ScramCredentialStore(str(tmp_path)).get("bob", "SCRAM-SHA-512") is None
    assert not os.path.exists(reopened.path + ".tmp")


def test_alter_errors_as_kafka_gives_them(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.set_password("carol", "SCRAM-SHA-256", "c-pw")
    results = store.alter(
        [delete("nobody"), delete("carol"), ScramDeletion("", SHA256), ScramDeletion("x", 0)],
        [upsert("dave"), upsert("low", iterations=4095), upsert("high", iterations=16385),
         ScramUpsertion("", SHA256, 4096, b"s", b"p" * 32),
         ScramUpsertion("weird", 7, 4096, b"s", b"p" * 32),
         upsert("edge-lo", iterations=4096), upsert("edge-hi", SHA512, iterations=16384)])
    by_user = {r.user: (ErrorCode(r.error_code).name, r.error_message) for r in results}
    assert by_user == {
        "carol": ("NONE", None),
        "dave": ("NONE", None), "edge-lo": ("NONE", None), "edge-hi": ("NONE", None),
        "nobody": ("RESOURCE_NOT_FOUND", "Attempt to delete a user credential that does not exist"),
        "": ("UNACCEPTABLE_CREDENTIAL", "Username must not be empty"),
        "x": ("UNSUPPORTED_SASL_MECHANISM", "Unknown SCRAM mechanism"),
        "low": ("UNACCEPTABLE_CREDENTIAL", "Too few iterations"),
        "high": ("UNACCEPTABLE_CREDENTIAL", "Too many iterations"),
        "weird": ("UNSUPPORTED_SASL_MECHANISM", "Unknown SCRAM mechanism"),
    }
    # Kafka's order: deletions done, upsertions done, then the errors
    assert [r.user for r in results][:4] == ["carol", "dave", "edge-lo", "edge-hi"]
    assert sorted(u for u, _ in store.snapshot()) == ["dave", "edge-hi", "edge-lo"]


def test_duplicate_user_in_one_request_changes_nothing_of_that_user():
    current = {("erin", "SCRAM-SHA-256"): ScramCredential.from_password("SCRAM-SHA-256", "e")}
    cases = [
        ([delete("erin"), delete("erin", SHA512)], []),        # twice in deletions
        ([delete("erin")], [upsert("erin")]),                    # in both lists
        ([], [upsert("erin"), upsert("erin", SHA512)]),          # twice in upsertions
        ([], [upsert("erin"), upsert("erin"), upsert("erin")]),  # thrice: one error only
    ]
    for deletions, upsertions in cases:
        results, changes = plan_alter(current, deletions, upsertions)
        assert results == [AlterResult("erin", ErrorCode.DUPLICATE_RESOURCE,
                                       "A user credential cannot be altered twice in the same request")]
        assert changes == {}
    # an earlier error for the user wins over a later duplicate
    results, _ = plan_alter(current, [delete("erin", SHA512)], [upsert("erin")])
    assert [ErrorCode(r.error_code).name for r in results] == ["RESOURCE_NOT_FOUND"]


def test_describe_gives_mechanism_and_iterations_only(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.alter([], [upsert("alice", SHA256, iterations=4096)])
    store.alter([], [upsert("alice", SHA512, iterations=8192), upsert("bob", SHA512)])
    everyone = store.describe()
    assert [(r.user, r.credential_infos) for r in everyone] == [
        ("alice", (CredentialInfo(SHA256, 4096), CredentialInfo(SHA512, 8192))),
        ("bob", (CredentialInfo(SHA512, 4096),))]
    assert store.describe([]) == everyone
    some = store.describe(["bob", "zed", "alice", "alice"])
    assert [(r.user, ErrorCode(r.error_code).name) for r in some] == [
        ("bob", "NONE"), ("zed", "RESOURCE_NOT_FOUND"), ("alice", "DUPLICATE_RESOURCE")]
    assert some[1].error_message == "Attempt to describe a user credential that does not exist: zed"
    assert describe_credentials({}, None) == []


def test_direct_edits_check_as_kafka_does(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    with pytest.raises(UnacceptableCredentialError):
        store.set_password("x", "SCRAM-SHA-256", "pw", iterations=100)
    with pytest.raises(UnacceptableCredentialError):
        store.set_password("", "SCRAM-SHA-256", "pw")
    with pytest.raises(ValueError):
        store.set_password("x", "SCRAM-SHA-1", "pw")
    with pytest.raises(ResourceNotFoundError):
        store.delete("x", "SCRAM-SHA-256")
    store.set_password("x", "SCRAM-SHA-256", "pw")
    store.delete("x", "SCRAM-SHA-256")
    assert ScramCredentialStore(str(tmp_path)).snapshot() == {}


def test_failed_save_leaves_file_and_memory_as_they_were(tmp_path, monkeypatch):
    store = ScramCredentialStore(str(tmp_path))
    store.set_password("alice", "SCRAM-SHA-256", "pw")
    before = open(store.path, "rb").read()

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        store.alter([delete("alice")], [upsert("bob")])
    monkeypatch.undo()
    assert open(store.path, "rb").read() == before
    assert sorted(store.snapshot()) == [("alice", "SCRAM-SHA-256")]
    assert sorted(ScramCredentialStore(str(tmp_path)).snapshot()) == [("alice", "SCRAM-SHA-256")]


@pytest.mark.parametrize("content", [b"{", b"[]", b'{"version": 2, "users": {}}',
                                     b'{"version": 1, "users": {"a": "x"}}',
                                     b'{"version": 1, "users": {"a": {"SCRAM-SHA-1": "x"}}}',
                                     b'{"version": 1, "users": {"a": {"SCRAM-SHA-256": "salt=A"}}}'])
def test_corrupt_file_is_a_clear_error(tmp_path, content):
    (tmp_path / ScramCredentialStore.FILENAME).write_bytes(content)
    with pytest.raises(ScramCredentialFormatError):
        ScramCredentialStore(str(tmp_path))


def test_zookeeper_user_config_round_trip(tmp_path):
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096)
    data = encode_zk_user_config({"SCRAM-SHA-256": cred}, {"producer_byte_rate": "1024"})
    doc = json.loads(data)
    assert doc == {"version": 1, "config": {"producer_byte_rate": "1024",
                                            "SCRAM-SHA-256": cred.to_kafka_string()}}
    assert b" " not in data
    creds, other = decode_zk_user_config(data)
    assert creds == {"SCRAM-SHA-256": cred} and other == {"producer_byte_rate": "1024"}
    for bad in (b"nope", b"{}", b'{"version":1,"config":{"SCRAM-SHA-256":"salt=x"}}'):
        with pytest.raises(ScramCredentialFormatError):
            decode_zk_user_config(bad)
    with pytest.raises(ValueError):
        encode_zk_user_config({"PLAIN": cred})

    store = ScramCredentialStore(str(tmp_path))
    store.set_password("u", "SCRAM-SHA-512", "old")
    store.replace_user("u", creds)                  # what a change notification applies
    assert sorted(store.snapshot()) == [("u", "SCRAM-SHA-256")]


def test_zookeeper_paths_sanitize_like_kafka():
    assert sanitize_user("alice") == "alice"
    assert sanitize_user("CN=a b,O=x*") == "CN%3Da%20b%2CO%3Dx%2A"
    assert sanitize_user("a.b-c_d~e") == "a.b-c_d~e"
    assert zk_user_path("us/er") == "/config/users/us%2Fer"
    assert json.loads(zk_change_notification("a b")) == {"version": 2, "entity_path": "users/a%20b"}
