"""ssl.principal.mapping.rules as Kafka reads them (the examples of Kafka's own SslPrincipalMapper tests),
and a certificate subject as the RFC 2253 DN Java would print."""

from __future__ import annotations

import pytest

from pybroker.broker.ssl_principal import NoMatchingRule, PrincipalMapper, rfc2253
from pybroker.config.types import ConfigError

KAFKA_RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize(("dn", "name"), [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_kafka_mapping_examples(dn: str, name: str) -> None:
    assert PrincipalMapper(KAFKA_RULES).name(dn) == name


@pytest.mark.parametrize("rules", [
    "DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/", "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U", "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/", "", ",   , , ,      , , ,   ", ",,RULE://,,,DEFAULT,,",
])
def test_valid_rules(rules: str) -> None:
    PrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules_are_a_config_error(rules: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PrincipalMapper(rules)
    assert caught.value.key == "ssl.principal.mapping.rules"


def test_rules_split_on_commas_outside_patterns() -> None:
    mapper = PrincipalMapper("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ")
    assert [(r.pattern.pattern if r.pattern else None, r.replacement, r.case) for r in mapper.rules] == [
        ("([A-Z]*)", "$1", "U"), ("([a-z]+)", "$1", ""), (None, "", "")]


def test_escaped_comma_in_a_name() -> None:
    mapper = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_a_reference_to_a_missing_group_is_literal_or_shortened() -> None:
    assert PrincipalMapper("RULE:^CN=(.*?),.*$/$1-$2/").name("CN=a,O=b") == "a-$2"
    assert PrincipalMapper("RULE:^CN=(.*?),.*$/$12/").name("CN=a,O=b") == "a2"


def test_no_matching_rule_refuses() -> None:
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/").name("CN=x,OU=Other")


def test_subject_to_rfc2253_most_specific_first_and_escaped() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "Example, Inc."),),
               (("organizationalUnitName", "eng"), ("userId", "7")), (("commonName", " alice+bob"),))
    assert rfc2253(subject) == "CN=\\ alice\\+bob,OU=eng+UID=7,O=Example\\, Inc.,C=US"
    assert rfc2253(None) == ""
