"""What each listener's SASL setup is, read once at startup from Kafka's keys.

- `security_protocol(config, listener)`: the one place that maps a listener name to its security
  protocol, through `listener.security.protocol.map` (whose default maps each protocol's own name to
  itself, so `SASL_PLAINTEXT://host:port` is SASL_PLAINTEXT). The listener work may replace it.
- `sasl.enabled.mechanisms`, overridable per listener as `listener.name.<listener>.sasl.enabled.mechanisms`.
- PLAIN users from `listener.name.<listener>.plain.sasl.jaas.config`, else `listener.name.<listener>.sasl.jaas.config`,
  else `sasl.jaas.config` (PlainLoginModule's `user_<name>="<password>"` options), as Kafka looks them up.
- `connections.max.reauth.ms` and `connection.failed.authentication.delay.ms`, per listener too.

A mistake (an unknown mechanism, a JAAS value that does not parse, PLAIN without users) is a
`ConfigError` at startup naming the key, never a value (they hold passwords).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pybroker.broker.security.jaas import JaasError, parse_jaas, plain_users
from pybroker.broker.security.jwt import Validation
from pybroker.broker.security.sasl_oauthbearer import JwksFile, OAuthValidator
from pybroker.broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from pybroker.config.broker_config import BrokerConfig, parse_listener
from pybroker.config.types import ConfigError

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def security_protocol(config: BrokerConfig, listener: str) -> str:
    """The security protocol of the listener named `listener` (Kafka's listener.security.protocol.map)."""
    for entry in config.get("listener.security.protocol.map") or ():
        name, _, protocol = str(entry).partition(":")
        if name.strip().upper() == listener.upper():
            return protocol.strip().upper()
    return listener.upper()


def listener_text(config: BrokerConfig, listener: str, key: str) -> tuple[str, str | None]:
    """A per-listener override (`listener.name.<l>.<key>`, kept as text) and its full key, if set."""
    full = f"listener.name.{listener.lower()}.{key}"
    return full, config.unknown.get(full)


@dataclass(frozen=True, slots=True)
class ListenerSasl:
    listener: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str] = field(repr=False)
    reauth_ms: int
    failure_delay_ms: int
    max_receive_size: int
    oauth: OAuthValidator | None = None


def _mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    key, text = listener_text(config, listener, "sasl.enabled.mechanisms")
    if text is not None:
        names = [n.strip() for n in text.split(",") if n.strip()]
    else:
        key, names = "sasl.enabled.mechanisms", [str(n).strip() for n in config.get("sasl.enabled.mechanisms")]
    names = [n.upper() for n in names]
    unsupported = [n for n in names if n not in SUPPORTED_MECHANISMS]
    if unsupported or not names:
        raise ConfigError(key, f"listener {listener}: {', '.join(unsupported) or 'no mechanism'} is not served "
                               f"(served: {', '.join(SUPPORTED_MECHANISMS)})")
    return tuple(dict.fromkeys(names))


def _plain_users(config: BrokerConfig, listener: str) -> dict[str, str]:
    candidates = [listener_text(config, listener, "plain.sasl.jaas.config"),
                  listener_text(config, listener, "sasl.jaas.config"),
                  ("sasl.jaas.config", config.get("sasl.jaas.config"))]
    key, text = next(((k, t) for k, t in candidates if t is not None), candidates[-1])
    if text is None:
        raise ConfigError(key, f"listener {listener} enables PLAIN but no JAAS config names its users")
    try:
        entry = parse_jaas(str(text))
    except JaasError as exc:
        raise ConfigError(key, str(exc)) from None
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise ConfigError(key, f"PLAIN needs {PLAIN_LOGIN_MODULE}, not {entry.login_module}")
    users = plain_users(entry)
    if not users:
        raise ConfigError(key, 'PlainLoginModule lists no users (user_<name>="<password>")')
    return users


def _long(config: BrokerConfig, listener: str, key: str) -> int:
    full, text = listener_text(config, listener, key)
    if text is None:
        return int(config.get(key))
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(full, f"invalid long value {text!r}") from None
    if value < 0:
        raise ConfigError(full, "must be at least 0")
    return value


def _oauth(config: BrokerConfig) -> OAuthValidator:
    url = config.get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ConfigError("sasl.oauthbearer.jwks.endpoint.url", "OAUTHBEARER needs a JWKS file (file://...)")
    try:
        jwks = JwksFile(str(url))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError("sasl.oauthbearer.jwks.endpoint.url", f"unusable JWKS: {type(exc).__name__}: "
                                                                f"{str(exc)[:200]}") from None
    rules = Validation(config.get("sasl.oauthbearer.expected.issuer"),
                       tuple(config.get("sasl.oauthbearer.expected.audience") or ()),
                       str(config.get("sasl.oauthbearer.sub.claim.name")),
                       int(config.get("sasl.oauthbearer.clock.skew.seconds")))
    return OAuthValidator(jwks, rules)


def listener_sasl(config: BrokerConfig, listener: str) -> ListenerSasl | None:
    """The SASL settings of one listener, or None when it does not authenticate with SASL."""
    if security_protocol(config, listener) not in SASL_PROTOCOLS:
        return None
    mechanisms = _mechanisms(config, listener)
    users = _plain_users(config, listener) if "PLAIN" in mechanisms else {}
    return ListenerSasl(listener, mechanisms, users, _long(config, listener, "connections.max.reauth.ms"),
                        _long(config, listener, "connection.failed.authentication.delay.ms"),
                        min(_long(config, listener, "sasl.server.max.receive.size"),
                            int(config.get("socket.request.max.bytes"))),
                        _oauth(config) if "OAUTHBEARER" in mechanisms else None)


def all_listeners_sasl(config: BrokerConfig) -> dict[str, ListenerSasl]:
    """Every SASL listener's settings by listener name (upper case), checked at startup."""
    out: dict[str, ListenerSasl] = {}
    for listener in config.listeners:
        name = parse_listener(listener)[0]
        settings = listener_sasl(config, name)
        if settings is not None:
            out[name.upper()] = settings
    return out

