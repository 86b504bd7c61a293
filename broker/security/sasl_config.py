"""What each listener's SASL setup is, read once at startup from Kafka's keys.

- The SASL listeners are those whose security protocol (`listener.security.protocol.map`, through
  `BrokerConfig.listener_specs`) is SASL_PLAINTEXT or SASL_SSL.
- `sasl.enabled.mechanisms`, `connections.max.reauth.ms`, `connection.failed.authentication.delay.ms`,
  `sasl.server.max.receive.size` and `sasl.jaas.config` may each be set for one listener with Kafka's
  `listener.name.<listener>.` prefix (`BrokerConfig.listener_get`).
- PLAIN users come from `listener.name.<listener>.plain.sasl.jaas.config`, else
  `listener.name.<listener>.sasl.jaas.config`, else `sasl.jaas.config` (PlainLoginModule's
  `user_<name>="<password>"` options), as Kafka looks them up.

A mistake (an unknown mechanism, a JAAS value that does not parse, PLAIN without users, OAUTHBEARER without
a JWKS file) is a `ConfigError` at startup naming the key, never a value (they hold passwords).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pybroker.broker.java_hash_order import hash_set_order
from pybroker.broker.security.jwt import Validation
from pybroker.broker.security.sasl_oauthbearer import JwksFile, OAuthValidator
from pybroker.config.broker_config import BrokerConfig
from pybroker.config.jaas import JaasError, parse_jaas, plain_users
from pybroker.config.listeners import LISTENER_PREFIX, SASL_PLAINTEXT, SASL_SSL
from pybroker.config.types import ConfigError
from pybroker.protocol.scram_mechanisms import MECHANISMS as SCRAM_MECHANISMS

SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


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
    key = config.listener_key(listener, "sasl.enabled.mechanisms")
    names = [str(n).strip().upper() for n in config.listener_get(listener, "sasl.enabled.mechanisms") or ()]
    names = [n for n in names if n]
    unsupported = [n for n in names if n not in SUPPORTED_MECHANISMS]
    if unsupported or not names:
        raise ConfigError(key, f"listener {listener}: {', '.join(unsupported) or 'no mechanism'} is not served "
                               f"(served: {', '.join(SUPPORTED_MECHANISMS)})")
    # Kafka answers them in a Java HashSet's order (broker/java_hash_order.py), and so do we
    return tuple(hash_set_order(names))


def _plain_users(config: BrokerConfig, listener: str) -> dict[str, str]:
    # Kafka's per-mechanism form first: listener.name.<listener>.plain.sasl.jaas.config (not in the key table)
    key = f"{LISTENER_PREFIX}{listener.lower()}.plain.sasl.jaas.config"
    text = config.unknown.get(key)
    if text is None:
        key, text = config.listener_key(listener, "sasl.jaas.config"), config.listener_get(listener, "sasl.jaas.config")
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


def listener_sasl(config: BrokerConfig, listener: str, protocol: str) -> ListenerSasl | None:
    """The SASL settings of one listener, or None when it does not authenticate with SASL."""
    if protocol not in SASL_PROTOCOLS:
        return None
    mechanisms = _mechanisms(config, listener)
    users = _plain_users(config, listener) if "PLAIN" in mechanisms else {}
    return ListenerSasl(listener, mechanisms, users, int(config.listener_get(listener, "connections.max.reauth.ms")),
                        int(config.listener_get(listener, "connection.failed.authentication.delay.ms")),
                        min(int(config.listener_get(listener, "sasl.server.max.receive.size")),
                            int(config.get("socket.request.max.bytes"))),
                        _oauth(config) if "OAUTHBEARER" in mechanisms else None)


def all_listeners_sasl(config: BrokerConfig) -> dict[str, ListenerSasl]:
    """Every SASL listener's settings by listener name (upper case), checked at startup."""
    out: dict[str, ListenerSasl] = {}
    for spec in config.listener_specs():
        settings = listener_sasl(config, spec.name, spec.security_protocol)
        if settings is not None:
            out[spec.name.upper()] = settings
    return out
