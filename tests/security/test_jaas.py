"""Kafka's sasl.jaas.config line, parsed by the rules of Kafka's JaasConfig."""

from __future__ import annotations

import pytest

from engine.errors import InvalidConfigError, JaasConfigError
from engine.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    listener_jaas_key,
    parse_jaas_config,
    plain_users,
    single_entry,
)

PLAIN_LINE = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')


def test_kafka_plain_line():
    (entry,) = parse_jaas_config(PLAIN_LINE)
    assert entry.login_module == PLAIN_LOGIN_MODULE and entry.control_flag == "required"
    assert entry.options == {"username": "admin", "password": "admin-secret",
                             "user_admin": "admin-secret", "user_alice": "alice-secret"}
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_kafka_scram_line_over_several_lines_with_comments():
    text = """
        org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED   // the broker's own
            username='broker'      /* inter-broker user */
            password = "b-secret"
        ;"""
    entry = single_entry(text, SCRAM_LOGIN_MODULE)
    assert entry.control_flag == "required"
    assert entry.options == {"username": "broker", "password": "b-secret"}


@pytest.mark.parametrize("flag", ["required", "Requisite", "SUFFICIENT", "optional"])
def test_control_flags_any_case(flag):
    (entry,) = parse_jaas_config(f"M {flag};")
    assert entry.control_flag == flag.lower() and entry.options == {}


def test_quoting_rules():
    (entry,) = parse_jaas_config(
        r'''M required a="with space" b='single "inner"' c="esc \"q\" \\ \n\t" d=plain e="x=y;z"'''
        r''' f="" g="/path/to/file" h="\101\60" i='it\'s';''')
    assert entry.options == {"a": "with space", "b": 'single "inner"', "c": 'esc "q" \\ \n\t',
                             "d": "plain", "e": "x=y;z", "f": "", "g": "/path/to/file",
                             "h": "A0", "i": "it's"}


def test_unquoted_value_stops_at_a_slash_as_in_java():
    """'/' is JAAS's comment character: an unquoted value holding one is cut there and the
    rest of the line is a comment -- Kafka fails the same line the same way."""
    with pytest.raises(JaasConfigError, match="Value not specified"):
        parse_jaas_config("M required path=/etc/x;")
    with pytest.raises(JaasConfigError, match="semi-colon"):
        parse_jaas_config("M required path=etc/x;")
    (entry,) = parse_jaas_config("M required path=x/etc/\n;")
    assert entry.options == {"path": "x"}


def test_last_value_wins_and_several_entries():
    entries = parse_jaas_config("A required k=1 k=2; B optional;")
    assert [e.login_module for e in entries] == ["A", "B"]
    assert entries[0].options == {"k": "2"}
    with pytest.raises(JaasConfigError, match="exactly one"):
        single_entry("A required; B optional;")
    with pytest.raises(JaasConfigError, match="login module"):
        single_entry("A required;", PLAIN_LOGIN_MODULE)


@pytest.mark.parametrize("text,why", [
    ("", "not specified"),
    ("   // only a comment", "not specified"),
    ("M", "control flag not specified"),
    ("M mandatory;", "Invalid login module control flag"),
    ("M required", "semi-colon"),
    ('M required username="admin"', "semi-colon"),
    ("M required username;", "Value not specified for key 'username'"),
    ("M required username=;", "Value not specified"),
    ("M required =x;", "option name"),
    ('M required username="admin;', "not closed"),
    ('M required username="ad\nmin";', "not closed"),
    ("M required /* open comment", "never closed"),
    ("; M required;", "login module class"),
    ("M ;", "Invalid login module control flag"),
])
def test_malformed(text, why):
    with pytest.raises(JaasConfigError, match=why) as e:
        parse_jaas_config(text)
    assert isinstance(e.value, InvalidConfigError) and e.value.code == 40


def test_errors_and_repr_never_show_values():
    with pytest.raises(JaasConfigError) as e:
        parse_jaas_config('M required password="hunter2" user_x')
    assert "hunter2" not in str(e.value)
    (entry,) = parse_jaas_config(PLAIN_LINE)
    assert "secret" not in repr(entry) and "user_alice" in repr(entry)
    with pytest.raises(JaasConfigError):
        parse_jaas_config(None)  # type: ignore[arg-type]


def test_listener_key():
    assert listener_jaas_key("SASL_SSL", "SCRAM-SHA-256") == \
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"
    assert listener_jaas_key("Internal", "PLAIN") == "listener.name.internal.plain.sasl.jaas.config"
