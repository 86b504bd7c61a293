"""`--command-config FILE`: Kafka's client security keys, as Kafka's tools read them.

    security.protocol=SASL_PLAINTEXT
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="...";

`sasl.username` / `sasl.password` (librdkafka's names) are taken too. For SSL and SASL_SSL, PEM files:
`ssl.truststore.location` (or librdkafka's `ssl.ca.location`; without one the system CAs), a client
certificate for mutual TLS as `ssl.keystore.location` (key and chain in one PEM) or librdkafka's
`ssl.certificate.location` + `ssl.key.location`, `ssl.key.password`, and
`ssl.endpoint.identification.algorithm` (`https`, the default, checks the broker's host name; empty does
not). Other keys are ignored, as a Kafka tool ignores keys it does not use.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from pybroker.config.jaas import JaasError, parse_jaas
from pybroker.config.properties import load_properties

PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")


class ClientConfigError(ValueError):
    """A command config that cannot be used (the message never holds the password)."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "GSSAPI"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    truststore: str | None = None
    certificate: str | None = None
    key: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.truststore)
        context.check_hostname = self.check_hostname
        if self.certificate is not None:
            context.load_cert_chain(self.certificate, self.key, self.key_password)
        return context


def load_client_security(path: Path) -> ClientSecurity:
    try:
        props = load_properties(path)
    except OSError as exc:
        raise ClientConfigError(f"--command-config: cannot read {path}: {exc.strerror or exc}") from None
    return client_security(props)


def client_security(props: dict[str, str]) -> ClientSecurity:
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError(f"security.protocol must be one of {', '.join(PROTOCOLS)}")
    mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI")).strip().upper()
    username, password = props.get("sasl.username"), props.get("sasl.password")
    if "sasl.jaas.config" in props:
        try:
            options = parse_jaas(props["sasl.jaas.config"]).options
        except JaasError as exc:
            raise ClientConfigError(f"sasl.jaas.config: {exc}") from None
        username, password = options.get("username", username), options.get("password", password)
    if protocol.startswith("SASL_") and (username is None or password is None):
        raise ClientConfigError("SASL needs a user name and password: sasl.jaas.config with username=... "
                                "password=..., or sasl.username and sasl.password")
    certificate = props.get("ssl.keystore.location", props.get("ssl.certificate.location"))
    return ClientSecurity(protocol, mechanism, username, password,
                          truststore=props.get("ssl.truststore.location", props.get("ssl.ca.location")),
                          certificate=certificate, key=props.get("ssl.key.location"),
                          key_password=props.get("ssl.key.password"),
                          check_hostname=props.get("ssl.endpoint.identification.algorithm", "https").strip() != "")
