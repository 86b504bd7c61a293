"""The broker's listeners at run time: one server each, TLS where the protocol says so, advertised addresses.

Built from the config before anything else starts, so bad TLS material stops startup with one line naming
the key. Each listener's connections learn their listener name and security protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL), the hook the SASL layer uses to demand authentication on SASL listeners; SSL
and SASL_SSL listeners get their TLS context. On an SSL listener the principal is the client
certificate's mapped name (`User:ANONYMOUS` without one).

Metadata, FindCoordinator and friends answer with the address of the listener the client came in on
(`BrokerState.address_of`); a listener bound to port 0 advertises the port it got.

Key stores are reloaded, as Kafka's dynamic SSL update does, when a `ssl.keystore.location` file changes
(`check_key_stores`, called periodically) and when AlterConfigs changes a listener's `ssl.keystore.*`
keys (checked before the change is accepted, applied after).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from pybroker.broker.connection import ANONYMOUS, KafkaConnection
from pybroker.broker.dispatch import REGISTRY
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.ssl_principal import rfc2253
from pybroker.broker.tls import ListenerTls
from pybroker.config.broker_config import BrokerConfig
from pybroker.config.listeners import LISTENER_PREFIX, SASL_PLAINTEXT, SASL_SSL, Listener, listener_prefix
from pybroker.config.types import ConfigError
from pybroker.protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

log = get_logger("pybroker.listeners")

#: a TLS handshake not done by then is dropped (it holds no connection slot yet, so it must not linger)
TLS_HANDSHAKE_TIMEOUT_S = 10.0
#: the keys whose change means a listener's key store must be loaded again
KEY_STORE_KEYS = frozenset({"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain",
                            "ssl.keystore.key", "ssl.keystore.password", "ssl.key.password"})

PrincipalOf = Callable[[asyncio.BaseTransport], str]


class Listeners:
    def __init__(self, config: BrokerConfig) -> None:
        """Call after `load_handlers()`: a SASL listener needs the SASL handlers."""
        self.config = config
        self.specs: list[Listener] = config.listener_specs()
        for spec in self.specs:
            if spec.security_protocol in (SASL_PLAINTEXT, SASL_SSL) and ApiKey.SASL_HANDSHAKE not in REGISTRY:
                # never serve a listener the operator meant to be authenticated without authentication
                raise ConfigError("listener.security.protocol.map",
                                  f"listener {spec.name} is {spec.security_protocol}, and this build serves no SASL")
        #: listener name -> its TLS (SSL and SASL_SSL listeners)
        self.tls: dict[str, ListenerTls] = {spec.name: ListenerTls(config, spec.name)
                                            for spec in self.specs if spec.tls}
        self.servers: list[asyncio.Server] = []

    async def start(self, state: BrokerState) -> list[tuple[Listener, int]]:
        """Bind every listener; (listener, bound port) for each."""
        loop = asyncio.get_running_loop()
        bound: list[tuple[Listener, int]] = []
        for spec in self.specs:
            tls = self.tls.get(spec.name)
            principal_of = _certificate_principal(tls) if tls is not None and spec.security_protocol == "SSL" \
                else None

            def protocol(spec: Listener = spec, principal_of: PrincipalOf | None = principal_of) -> KafkaConnection:
                return KafkaConnection(state, spec.name, spec.security_protocol, principal_of)

            server = await loop.create_server(
                protocol, spec.host or "0.0.0.0", spec.port, reuse_address=True, backlog=1024,
                ssl=tls.context if tls is not None else None,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if tls is not None else None)
            self.servers.append(server)
            port = int(server.sockets[0].getsockname()[1])
            state.set_advertised_port(port, spec.name)
            bound.append((spec, port))
        return bound

    # -- key store reloads ---------------------------------------------------------------------------
    def check_key_stores(self) -> None:
        """The periodic check: reload each key store whose file changed since it was loaded."""
        for name, tls in self.tls.items():
            if not tls.watch.changed():
                continue
            try:
                if tls.reload():
                    log.info("key store reloaded", listener=name, location=tls.material.location)
            except ConfigError as exc:
                tls.watch.rearm()  # one warning per change of the file
                log.warning("key store not reloaded", listener=name, key=exc.key, reason=exc.message)

    def _affected(self, changed: set[str]) -> list[ListenerTls]:
        return [tls for name, tls in self.tls.items()
                if any(_suffix(key, name) in KEY_STORE_KEYS for key in changed)]

    def check_update(self, changed: set[str]) -> None:
        """Before a dynamic change is accepted: the new key stores must load (`ConfigError` otherwise)."""
        for tls in self._affected(changed):
            tls.check()

    def apply_update(self, changed: set[str]) -> None:
        for tls in self._affected(changed):
            if tls.reload():
                log.info("key store reloaded", listener=tls.listener, changed=sorted(changed))

    def close(self) -> None:
        for server in self.servers:
            server.close()


def _suffix(key: str, listener: str) -> str:
    """`listener.name.<listener>.<key>` -> key; an unprefixed key as it is; another listener's -> ''."""
    prefix = listener_prefix(listener)
    if key.startswith(prefix):
        return key[len(prefix):]
    return "" if key.startswith(LISTENER_PREFIX) else key


def _certificate_principal(tls: ListenerTls) -> PrincipalOf:
    """`User:<mapped DN>` of the client certificate; `User:ANONYMOUS` without one; `NoMatchingRule`
    when no mapping rule applies (the connection is refused)."""
    def principal_of(transport: asyncio.BaseTransport) -> str:
        cert = transport.get_extra_info("peercert")
        if not cert:
            return ANONYMOUS
        return "User:" + tls.mapper.name(rfc2253(cert.get("subject")))

    return principal_of

