"""The broker's effective configuration: defaults, then the properties file, then `--override`s.

Values are parsed and validated once, at load time, against `pybroker.config.definitions`; a bad value
raises `ConfigError` naming the key (the CLI turns it into a one-line message and exit status 2).
Keys we do not know are kept and reported as warnings, as Kafka does, so Kafka's own
`server.properties` loads unchanged.

Topic configs resolve as Kafka resolves them: a topic override, else the first broker synonym that was
set explicitly (scaled: `log.retention.hours` to ms), else the topic default.

Dynamic broker configs (changed at runtime with AlterConfigs) sit above the static ones, as in Kafka:
this broker's own dynamic value, then the cluster-wide dynamic default, then `server.properties` and
`--override`s, then the table's default. Each key's value is looked up through those layers in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from pybroker.config.definitions import BROKER, TOPIC, ConfigDef
from pybroker.config.listeners import (
    LISTENER_PREFIX,
    Listener,
    advertised_addresses,
    listener_prefix,
    parse_listeners,
)
from pybroker.config.listeners import parse_listener as parse_listener  # its old home; callers import it here
from pybroker.config.types import PARSERS, ConfigError, render


class ConfigSource(IntEnum):
    """DescribeConfigs' source codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


#: the words of Kafka's ConfigDef for a value its type cannot parse
_NOT_OF_TYPE = {"int": "Not a number of type INT", "short": "Not a number of type SHORT",
                "long": "Not a number of type LONG", "double": "Not a number of type DOUBLE",
                "boolean": "Expected value to be either true or false"}


def parse_value(definition: ConfigDef, text: str) -> Any:
    """Text to a checked value, or `ConfigError` naming the key in Kafka's words ("Invalid value abc for
    configuration retention.ms: Not a number of type LONG"), never Python's own parse error."""
    parser, _ = PARSERS[definition.type]
    said = f"Invalid value {text.strip()} for configuration {definition.key}"
    try:
        value = parser(text)
    except ValueError as exc:
        raise ConfigError(definition.key, f"{said}: {_NOT_OF_TYPE.get(definition.type, str(exc))}") from None
    problem = definition.validator(value) if definition.validator else None
    if problem:
        raise ConfigError(definition.key, f"{said}: {'Value ' + problem if problem.startswith('must') else problem}")
    return value


def broker_definition(key: str) -> ConfigDef | None:
    """A broker key's definition; a key with Kafka's `listener.name.<name>.` prefix has its suffix's,
    when that key may be set per listener."""
    definition = BROKER.get(key)
    if definition is not None or not key.startswith(LISTENER_PREFIX):
        return definition
    name, dot, suffix = key[len(LISTENER_PREFIX):].partition(".")
    definition = BROKER.get(suffix)
    return definition if name and dot and definition is not None and definition.per_listener else None


class _BrokerKeys(Mapping[str, ConfigDef]):
    """The broker table, as a mapping that also knows listener-prefixed keys (for AlterConfigs)."""

    def __getitem__(self, key: str) -> ConfigDef:
        definition = broker_definition(key)
        if definition is None:
            raise KeyError(key)
        return definition

    def __iter__(self) -> Iterator[str]:
        return iter(BROKER)

    def __len__(self) -> int:
        return len(BROKER)


BROKER_KEYS: Mapping[str, ConfigDef] = _BrokerKeys()


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """One config as DescribeConfigs shows it."""

    definition: ConfigDef
    value: Any
    source: ConfigSource
    #: (key, text value, source) from most to least specific, as Kafka lists synonyms
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]

    @property
    def text(self) -> str | None:
        return render(self.definition.type, self.value)


@dataclass(slots=True)
class BrokerConfig:
    explicit: dict[str, Any] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    #: dynamic configs of this broker (resource name = node id) and cluster-wide (resource name ""), parsed
    dynamic_node: dict[str, Any] = field(default_factory=dict)
    dynamic_default: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, *layers: Mapping[str, str]) -> BrokerConfig:
        """Apply the layers in order (file, then overrides); later layers win."""
        config = cls()
        for layer in layers:
            for key, text in layer.items():
                definition = broker_definition(key)
                if definition is None:
                    config.unknown[key] = text
                    continue
                try:
                    config.explicit[key] = parse_value(definition, text)
                except ConfigError as exc:  # name the key as set (a listener-prefixed one, say)
                    raise ConfigError(key, exc.message) from None
        config._check_relations()
        return config

    def _check_relations(self) -> None:
        dirs = self.log_dirs
        if not dirs:
            raise ConfigError("log.dirs", "at least one log directory is required")
        if self.get("group.min.session.timeout.ms") > self.get("group.max.session.timeout.ms"):
            raise ConfigError("group.min.session.timeout.ms", "must not exceed group.max.session.timeout.ms")
        advertised_addresses(self.listener_specs(), list(self.get("advertised.listeners") or []))

    def _layers(self) -> tuple[tuple[dict[str, Any], ConfigSource], ...]:
        """Where a set broker value can come from, most specific first."""
        return ((self.dynamic_node, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.explicit, ConfigSource.STATIC_BROKER_CONFIG))

    def _set_values(self, key: str) -> list[tuple[Any, ConfigSource]]:
        return [(layer[key], source) for layer, source in self._layers() if key in layer]

    def get(self, key: str) -> Any:
        for layer, _ in self._layers():
            if key in layer:
                return layer[key]
        return BROKER_KEYS[key].default

    def listener_get(self, listener: str, key: str) -> Any:
        """A per-listener key's value for one listener: `listener.name.<name>.<key>` if set in any
        layer, else the key itself (Kafka's prefix override)."""
        prefixed = listener_prefix(listener) + key
        for layer, _ in self._layers():
            if prefixed in layer:
                return layer[prefixed]
        return self.get(key)

    def listener_key(self, listener: str, key: str) -> str:
        """The name under which `key` is set for `listener` (prefixed or not), for error messages."""
        prefixed = listener_prefix(listener) + key
        return prefixed if any(prefixed in layer for layer, _ in self._layers()) else key

    def source(self, key: str) -> ConfigSource:
        for layer, source in self._layers():
            if key in layer:
                return source
        return ConfigSource.DEFAULT_CONFIG

    def set_dynamic(self, source: ConfigSource, texts: Mapping[str, str]) -> None:
        """Replace one dynamic layer with `texts` (already validated with `validate_dynamic_broker`)."""
        parsed = {key: parse_value(BROKER_KEYS[key], text) for key, text in texts.items()}
        if source == ConfigSource.DYNAMIC_BROKER_CONFIG:
            self.dynamic_node = parsed
        elif source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG:
            self.dynamic_default = parsed
        else:
            raise ValueError(f"{source!r} is not a dynamic layer")

    @property
    def node_id(self) -> int:
        if "node.id" in self.explicit:
            return int(self.explicit["node.id"])
        broker_id = int(self.get("broker.id"))
        return broker_id if broker_id >= 0 else int(BROKER["node.id"].default)

    @property
    def log_dirs(self) -> list[str]:
        dirs = self.get("log.dirs")
        return list(dirs) if dirs else [self.get("log.dir")]

    @property
    def listeners(self) -> list[str]:
        return list(self.get("listeners"))

    def listener_specs(self) -> list[Listener]:
        """The listeners, each with its security protocol from `listener.security.protocol.map`. While the
        map is Kafka's default, a controller listener name it lacks speaks PLAINTEXT, as in Kafka."""
        protocol_map = list(self.get("listener.security.protocol.map"))
        if self.source("listener.security.protocol.map") == ConfigSource.DEFAULT_CONFIG:
            mapped = {entry.partition(":")[0].upper() for entry in protocol_map}
            protocol_map += [f"{name}:PLAINTEXT" for name in self.get("controller.listener.names")
                             if name.upper() not in mapped]
        return parse_listeners(self.listeners, protocol_map)

    def advertised_addresses(self) -> dict[str, tuple[str, int]]:
        """Listener name -> the (host, port) clients connected to it are told (port 0: the bound port)."""
        return advertised_addresses(self.listener_specs(), list(self.get("advertised.listeners") or []))

    def resolve_broker(self, key: str) -> ResolvedConfig:
        definition = BROKER[key]
        synonyms = [(key, render(definition.type, value), source) for value, source in self._set_values(key)]
        if definition.default is not None or not synonyms:
            synonyms.append((key, render(definition.type, definition.default), ConfigSource.DEFAULT_CONFIG))
        return ResolvedConfig(definition, self.get(key), self.source(key), tuple(synonyms))

    def resolve_topic(self, key: str, overrides: Mapping[str, str]) -> ResolvedConfig:
        """A topic config's effective value and where it came from."""
        definition = TOPIC[key]
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        value: Any = None
        source = ConfigSource.DEFAULT_CONFIG
        found = False
        if key in overrides:
            value = parse_value(definition, overrides[key])
            source, found = ConfigSource.DYNAMIC_TOPIC_CONFIG, True
            synonyms.append((key, overrides[key], source))
        for broker_key, multiplier in definition.synonyms:
            for broker_value, broker_source in self._set_values(broker_key):
                synonyms.append((broker_key, render(BROKER[broker_key].type, broker_value), broker_source))
                if not found and broker_value is not None:
                    value = broker_value * multiplier if multiplier != 1 else broker_value
                    source, found = broker_source, True
        if not found:
            value = definition.default
        if definition.synonyms:
            last_key = definition.synonyms[-1][0]
            last_default = BROKER[last_key].default
            if not self._set_values(last_key) and last_default is not None:
                synonyms.append((last_key, render(BROKER[last_key].type, last_default),
                                 ConfigSource.DEFAULT_CONFIG))
        return ResolvedConfig(definition, value, source, tuple(synonyms))

    def topic_values(self, overrides: Mapping[str, str]) -> dict[str, Any]:
        return {key: self.resolve_topic(key, overrides).value for key in TOPIC}

    def effective(self) -> dict[str, str | None]:
        """Every key's value as it is in force now (secrets replaced), for the startup log line."""
        return {key: "[hidden]" if definition.sensitive and self.get(key) is not None
                else render(definition.type, self.get(key))
                for key, definition in sorted(BROKER.items())}

    def redacted(self) -> dict[str, str | None]:
        """Every explicitly set key with its value, secrets replaced, for the startup log line."""
        out: dict[str, str | None] = {}
        for key, value in sorted(self.explicit.items()):
            definition = BROKER_KEYS[key]
            out[key] = "[hidden]" if definition.sensitive else render(definition.type, value)
        return out


def validate_topic_overrides(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Check CreateTopics/AlterConfigs topic configs; `ConfigError` on an unknown key or a bad value."""
    clean: dict[str, str] = {}
    for key, text in overrides.items():
        definition = TOPIC.get(key)
        if definition is None:
            raise ConfigError(key, "unknown topic config")
        if text is None:
            raise ConfigError(key, "null value")
        parse_value(definition, text)
        clean[key] = text
    return clean


def validate_dynamic_broker(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Check dynamic broker configs (AlterConfigs on a broker resource); `ConfigError` on an unknown key,
    a key that cannot change at runtime, or a bad value."""
    clean: dict[str, str] = {}
    for key, text in overrides.items():
        definition = broker_definition(key)
        if definition is None:
            raise ConfigError(key, "unknown broker config")
        if not definition.dynamic:
            raise ConfigError(key, "cannot be updated dynamically; set it in server.properties and restart")
        if text is None:
            raise ConfigError(key, "null value")
        parse_value(definition, text)
        clean[key] = text
    return clean
