"""Listeners as Kafka defines them: `NAME://HOST:PORT`, a security protocol per name, advertised addresses.

`listeners` names each endpoint; `listener.security.protocol.map` says what each name speaks (PLAINTEXT,
SSL, SASL_PLAINTEXT, SASL_SSL); `advertised.listeners` says, per name, what address clients are told to
use. Kafka's rules hold: names are case-insensitive (kept upper case), unique, every name is in the map,
and two listeners may not share a port (port 0, "any free port", excepted). A listener missing from
`advertised.listeners` advertises its own address, so a client is never told of no broker at all.

Pure parsing over the values, so `BrokerConfig` can check them at load time without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybroker.config.types import ConfigError

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
#: the protocols that run over TLS: their listeners need key material
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
#: Kafka's prefix of a key set for one listener: `listener.name.<lowercase name>.<key>`
LISTENER_PREFIX = "listener.name."


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # upper case, as Kafka normalises it
    host: str
    port: int
    security_protocol: str

    @property
    def tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def config_prefix(self) -> str:
        return listener_prefix(self.name)


def listener_prefix(name: str) -> str:
    return f"{LISTENER_PREFIX}{name.lower()}."


def parse_listener(listener: str, key: str = "listeners") -> tuple[str, str, int]:
    """`PLAINTEXT://host:port` to (NAME, host, port); `ConfigError` naming `key` on anything else."""
    name, sep, address = listener.partition("://")
    host, colon, port_text = address.rpartition(":")
    if not sep or not name or not colon or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(key, f"invalid listener {listener!r}, expected NAME://HOST:PORT")
    return name.strip().upper(), host.strip("[]"), int(port_text)


def parse_protocol_map(entries: list[str]) -> dict[str, str]:
    """`NAME:PROTOCOL` pairs to a dict; `ConfigError` on a bad pair, protocol or repeated name."""
    key = "listener.security.protocol.map"
    mapping: dict[str, str] = {}
    for entry in entries:
        name, colon, protocol = (part.strip() for part in entry.partition(":"))
        if not colon or not name or not protocol:
            raise ConfigError(key, f"invalid entry {entry!r}, expected NAME:PROTOCOL")
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(key, f"unknown security protocol {protocol!r} for listener {name} "
                                   f"(expected one of {', '.join(SECURITY_PROTOCOLS)})")
        if name.upper() in mapping:
            raise ConfigError(key, f"listener {name} is mapped more than once")
        mapping[name.upper()] = protocol.upper()
    return mapping


def parse_listeners(listeners: list[str], protocol_map: list[str]) -> list[Listener]:
    """The listeners with their security protocols, checked as Kafka checks them."""
    protocols = parse_protocol_map(protocol_map)
    parsed: list[Listener] = []
    names: set[str] = set()
    ports: set[int] = set()
    for text in listeners:
        name, host, port = parse_listener(text)
        if name in names:
            raise ConfigError("listeners", f"each listener must have a different name; {name} appears twice")
        if port and port in ports:
            raise ConfigError("listeners", f"each listener must have a different port; {port} appears twice")
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError("listener.security.protocol.map",
                              f"no security protocol defined for listener {name}")
        names.add(name)
        ports.add(port)
        parsed.append(Listener(name, host, port, protocol))
    return parsed


def advertised_addresses(listeners: list[Listener], advertised: list[str]) -> dict[str, tuple[str, int]]:
    """Listener name -> (host, port) told to clients; a listener not advertised tells its own address."""
    known = {listener.name for listener in listeners}
    addresses = {listener.name: (listener.host, listener.port) for listener in listeners}
    seen: set[str] = set()
    for text in advertised:
        name, host, port = parse_listener(text, "advertised.listeners")
        if name not in known:
            raise ConfigError("advertised.listeners", f"{name} is not one of the listeners")
        if name in seen:
            raise ConfigError("advertised.listeners", f"{name} is advertised twice")
        seen.add(name)
        addresses[name] = (host, port)
    return addresses
