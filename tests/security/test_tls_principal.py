"""ssl.principal.mapping.rules by Kafka's SslPrincipalMapper semantics (its documented examples and
rule grammar), and the distinguished name string Java's X500Principal.getName() gives."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from engine.errors import InvalidConfigError, SslPrincipalMappingError
from engine.security.ssl_principal import ANONYMOUS, SslPrincipalMapper, dn_rfc2253
from tests.security.certs import make_pki


def test_kafka_documented_example():
    # Kafka's documentation (Security, "Customizing SSL User Name")
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
                                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
                                "DEFAULT")
    assert mapper.name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "serviceuser"
    assert mapper.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "adminuser@admin"
    assert mapper.name("O=x,cn=Kafka.Broker1,C=US") == "kafka.broker1"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_rules_in_order_with_case_flags():
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT"]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"


@pytest.mark.parametrize("rules,shown", [
    ("", "[]"), ("DEFAULT", "[DEFAULT]"), ("RULE://", "[RULE:/]"), ("RULE:/.*/", "[RULE:/.*]"),
    ("RULE:/.*/L", "[RULE:/.*/L]"), ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
    ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
    (",   , , ,      , , ,   ", "[]"),                          # empty rules are ignored
    (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
    ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),     # escapes
    ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
     "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]"),
])
def test_rule_splitting(rules, shown):
    assert str(SslPrincipalMapper(rules)) == shown


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    "RULE:^CN=(.*$/$1/",                     # not a regular expression
    "RULE:^CN=.*$/$1/",                      # a group reference without a group
    "RULE:^CN=(.*)$/x\\/",                   # a trailing escape
])
def test_invalid_rules(rules):
    with pytest.raises(InvalidConfigError, match="ssl.principal.mapping.rules"):
        SslPrincipalMapper(rules)


def test_valid_rules_with_tricky_character_classes():
    for rules in ["RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/", "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
                  "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U"]:
        SslPrincipalMapper(rules)


def test_escaped_comma_in_a_name():
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_back_references_as_kafka_expands_them():
    assert SslPrincipalMapper("RULE:^CN=(a)(b)(c)$/$3$2$1-$4/").name("CN=abc") == "cba-$4"    # no group 4: literal
    assert SslPrincipalMapper("RULE:^CN=(x)$/$12/").name("CN=x") == "x2"                    # $1 then "2"
    assert SslPrincipalMapper("RULE:^CN=(x)$/[$0]/").name("CN=x") == "[CN=x]"
    assert SslPrincipalMapper("RULE:^CN=(?<user>\\w+)$/${user}!/").name("CN=bob") == "bob!"
    assert SslPrincipalMapper("RULE:^CN=(\\w+)$/\\$1=$1/").name("CN=bob") == "$1=bob"


def test_no_matching_rule():
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(SslPrincipalMappingError, match="No rules apply to CN=bob,OU=other"):
        mapper.name("CN=bob,OU=other")


def test_default_rules_and_anonymous():
    mapper = SslPrincipalMapper.from_configs({})
    assert str(mapper) == "[DEFAULT]" and mapper.principal(None) == ANONYMOUS == "User:ANONYMOUS"


def test_dn_is_rfc2253_as_java_writes_it(tmp_path):
    pki = make_pki(str(tmp_path))
    # the certificate holds C, O, OU, CN; Java's getName() lists them the other way round
    assert dn_rfc2253(pki.client.cert.subject) == "CN=alice,OU=eng,O=acme,C=US"
    assert SslPrincipalMapper().principal(pki.client.cert) == "User:CN=alice,OU=eng,O=acme,C=US"
    assert SslPrincipalMapper().principal(pki.client.cert.public_bytes(Encoding.DER)).endswith("C=US")
    name = x509.Name([
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COUNTRY_NAME, "US")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc.")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "R+D")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COMMON_NAME, " bob#1 ")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.EMAIL_ADDRESS, "bob@acme.com")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "acme")]),
    ])
    # emailAddress has no RFC 2253 keyword: OID=#<DER hex> (IA5String, tag 0x16), as Java writes it
    email = "1.2.840.113549.1.9.1=#160c" + b"bob@acme.com".hex()
    assert dn_rfc2253(name) == f"DC=acme,{email},CN=\\ bob#1\\ ,OU=R\\+D,O=Acme\\, Inc.,C=US"
