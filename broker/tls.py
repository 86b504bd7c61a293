"""TLS for a listener: an `ssl.SSLContext` from Kafka's PEM key material, reloadable in place.

Kafka's PEM forms are all accepted: `ssl.keystore.location` (one PEM file with the private key and the
certificate chain) or `ssl.keystore.certificate.chain` + `ssl.keystore.key` (inline PEM text), the key
optionally encrypted with `ssl.key.password`; trust from `ssl.truststore.location` or
`ssl.truststore.certificates`. Every key is read per listener (`listener.name.<name>.` prefix first).

Bad material is a `ConfigError` naming the key as the operator set it (never a password's value), so
startup ends with exit status 2 and one line, and a dynamic update is refused with the old certificate
still in use.

Reloading: the server keeps one context for its whole life, and a new key store is loaded *into* that
context (`load_cert_chain` again) after a scratch context proved it loads. OpenSSL gives each connection
its own copy of the certificate at the handshake, so new connections get the new certificate and
existing ones go on untouched. `KeyStoreWatch` notices a changed `ssl.keystore.location` file by its
stat (inode, size, mtime) for the periodic check.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass

from pybroker.broker.ssl_principal import PrincipalMapper
from pybroker.config.broker_config import BrokerConfig
from pybroker.config.types import ConfigError

#: Kafka's ssl.client.auth values -> what the TLS library asks of the client
CLIENT_AUTH: dict[str, ssl.VerifyMode] = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
PROTOCOL_VERSIONS: dict[str, ssl.TLSVersion] = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
#: Kafka (IANA) cipher suite names -> OpenSSL's: key exchange, then bulk cipher and MAC
_KEY_EXCHANGE = {"ECDHE_ECDSA": "ECDHE-ECDSA-", "ECDHE_RSA": "ECDHE-RSA-", "DHE_RSA": "DHE-RSA-", "RSA": ""}
_BULK = {"AES_128_GCM_SHA256": "AES128-GCM-SHA256", "AES_256_GCM_SHA384": "AES256-GCM-SHA384",
         "CHACHA20_POLY1305_SHA256": "CHACHA20-POLY1305", "AES_128_CBC_SHA256": "AES128-SHA256",
         "AES_256_CBC_SHA384": "AES256-SHA384", "AES_128_CBC_SHA": "AES128-SHA", "AES_256_CBC_SHA": "AES256-SHA"}
#: TLS 1.3 suites: always offered by the TLS library when TLS 1.3 is on
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                          "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"})


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """Where a listener's key store comes from, and what to call it in an error."""

    location: str | None
    chain: str | None
    key: str | None
    password: str | None


class ListenerTls:
    """One TLS listener's context, principal mapper and key store (reloaded in place)."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        self.config = config
        self.listener = listener
        self.material = key_material(config, listener)
        self.watch = KeyStoreWatch(self.material.location)  # stamped before the load: no change is missed
        self.context = build_context(config, listener)
        self.mapper = PrincipalMapper(config.listener_get(listener, "ssl.principal.mapping.rules"),
                                      config.listener_key(listener, "ssl.principal.mapping.rules"))

    def check(self) -> None:
        """The key store as configured now loads (else `ConfigError`); for a dynamic update's check."""
        load_key_store(self.config, self.listener, ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))

    def reload(self) -> bool:
        """Load the key store as configured now into the live context; False when nothing changed."""
        material = key_material(self.config, self.listener)
        if material == self.material and not self.watch.changed():
            return False
        watch = KeyStoreWatch(material.location)
        self.check()  # a bad new store leaves the old one in use
        load_key_store(self.config, self.listener, self.context)
        self.material, self.watch = material, watch
        return True


class KeyStoreWatch:
    """Whether a key store file changed since it was loaded (a cheap stat, for the periodic check)."""

    def __init__(self, location: str | None) -> None:
        self.location = location
        self.stamp = _stamp(location)

    def changed(self) -> bool:
        return self.location is not None and _stamp(self.location) != self.stamp

    def rearm(self) -> None:
        """Take the file as it is now as seen (after a failed reload: warn once, not every check)."""
        self.stamp = _stamp(self.location)


def _stamp(location: str | None) -> tuple[int, int, int] | None:
    if location is None:
        return None
    try:
        st = os.stat(location)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def key_material(config: BrokerConfig, listener: str) -> KeyMaterial:
    def get(key: str) -> str | None:
        value = config.listener_get(listener, key)
        return str(value) if value is not None else None

    return KeyMaterial(get("ssl.keystore.location"), get("ssl.keystore.certificate.chain"),
                       get("ssl.keystore.key"), get("ssl.key.password"))


def build_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """A server context for `listener` from its ssl.* keys; `ConfigError` naming the key at fault."""
    def get(key: str) -> object:
        return config.listener_get(listener, key)

    def name(key: str) -> str:
        return config.listener_key(listener, key)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    enabled = list(get("ssl.enabled.protocols"))  # type: ignore[call-overload]
    versions = [PROTOCOL_VERSIONS[v] for v in enabled if v in PROTOCOL_VERSIONS]
    if not versions:
        raise ConfigError(name("ssl.enabled.protocols"),
                          f"none of {', '.join(enabled) or 'nothing'} is served; use TLSv1.2 and/or TLSv1.3")
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    suites = list(get("ssl.cipher.suites"))  # type: ignore[call-overload]
    if suites:
        _set_cipher_suites(context, suites, name("ssl.cipher.suites"))
    load_key_store(config, listener, context)
    client_auth = str(get("ssl.client.auth"))
    context.verify_mode = CLIENT_AUTH[client_auth]
    if client_auth != "none":
        _load_trust_store(config, listener, context)
    return context


def _set_cipher_suites(context: ssl.SSLContext, suites: list[str], key: str) -> None:
    tls12: list[str] = []
    for suite in suites:
        if suite in TLS13_SUITES:
            continue
        openssl_name = _openssl_name(suite)
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(openssl_name)
        except ssl.SSLError:
            raise ConfigError(key, f"unknown or unavailable cipher suite {suite!r}") from None
        tls12.append(openssl_name)
    if not any(suite in TLS13_SUITES for suite in suites):
        context.maximum_version = min(context.maximum_version, ssl.TLSVersion.TLSv1_2)
    if tls12:
        context.set_ciphers(":".join(tls12))
    elif context.minimum_version < ssl.TLSVersion.TLSv1_3:
        context.minimum_version = ssl.TLSVersion.TLSv1_3  # only TLS 1.3 suites were named


def _openssl_name(suite: str) -> str:
    """`TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384` -> `ECDHE-RSA-AES256-GCM-SHA384`; other names as they are."""
    if suite.startswith("TLS_") and "_WITH_" in suite:
        exchange, _, bulk = suite[4:].partition("_WITH_")
        if exchange in _KEY_EXCHANGE and bulk in _BULK:
            return _KEY_EXCHANGE[exchange] + _BULK[bulk]
    return suite


def load_key_store(config: BrokerConfig, listener: str, context: ssl.SSLContext) -> None:
    """Load the listener's certificate chain and private key into `context`."""
    def name(key: str) -> str:
        return config.listener_key(listener, key)

    store_type = str(config.listener_get(listener, "ssl.keystore.type")).upper()
    if store_type != "PEM":
        raise ConfigError(name("ssl.keystore.type"),
                          f"{store_type} key stores are not served; set ssl.keystore.type=PEM")
    if config.listener_get(listener, "ssl.keystore.password") is not None:
        raise ConfigError(name("ssl.keystore.password"),
                          "a PEM key store has no store password; give the key's password in ssl.key.password")
    material = key_material(config, listener)
    if material.location is not None and (material.chain is not None or material.key is not None):
        raise ConfigError(name("ssl.keystore.location"),
                          "set either ssl.keystore.location or ssl.keystore.certificate.chain and ssl.keystore.key")
    if material.location is not None:
        _load_chain(context, material.location, None, material.password, name("ssl.keystore.location"),
                    name("ssl.key.password"))
        return
    if material.chain is None or material.key is None:
        missing = "ssl.keystore.location" if material.chain is None and material.key is None else \
            "ssl.keystore.key" if material.chain is not None else "ssl.keystore.certificate.chain"
        raise ConfigError(name(missing), f"a TLS listener ({listener}) needs a key store")
    with tempfile.TemporaryDirectory(prefix="pybroker-tls-") as scratch:  # mode 0700, removed at once
        chain_path = os.path.join(scratch, "chain.pem")
        key_path = os.path.join(scratch, "key.pem")
        for path, text in ((chain_path, material.chain), (key_path, material.key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(_pem_text(text))
        _load_chain(context, chain_path, key_path, material.password, name("ssl.keystore.certificate.chain"),
                    name("ssl.key.password"), key_key=name("ssl.keystore.key"))


def _pem_text(text: str) -> str:
    """Inline PEM from a properties file may have lost its line breaks around the armour."""
    return text if "\n" in text else text.replace("-----BEGIN", "\n-----BEGIN").replace("-----END", "\n-----END") \
        .replace("----- ", "-----\n").replace(" -----", "\n-----").strip() + "\n"


def _load_chain(context: ssl.SSLContext, certfile: str, keyfile: str | None, password: str | None,
                key: str, password_key: str, key_key: str | None = None) -> None:
    if keyfile is None and not os.path.isfile(certfile):
        raise ConfigError(key, f"cannot read {certfile}: no such file")
    needs_password: list[bool] = []

    def ask() -> bytes:
        needs_password.append(True)
        if password is None:
            raise ConfigError(password_key, "the private key is encrypted and no password is set")
        return password.encode()

    try:
        context.load_cert_chain(certfile, keyfile, ask)
    except ConfigError:
        raise
    except ssl.SSLError as exc:
        if needs_password:
            raise ConfigError(password_key, "cannot decrypt the private key (wrong password?)") from None
        reason = exc.reason or str(exc)
        raise ConfigError(key_key or key, f"cannot load the certificate chain and private key ({reason})") from None
    except OSError as exc:
        raise ConfigError(key, f"cannot read {certfile}: {exc.strerror or exc}") from None


def _load_trust_store(config: BrokerConfig, listener: str, context: ssl.SSLContext) -> None:
    def name(key: str) -> str:
        return config.listener_key(listener, key)

    location = config.listener_get(listener, "ssl.truststore.location")
    certificates = config.listener_get(listener, "ssl.truststore.certificates")
    if location is None and certificates is None:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    store_type = str(config.listener_get(listener, "ssl.truststore.type")).upper()
    if store_type != "PEM":
        raise ConfigError(name("ssl.truststore.type"),
                          f"{store_type} trust stores are not served; set ssl.truststore.type=PEM")
    if config.listener_get(listener, "ssl.truststore.password") is not None:
        raise ConfigError(name("ssl.truststore.password"), "a PEM trust store has no password")
    try:
        if location is not None:
            context.load_verify_locations(cafile=str(location))
        else:
            context.load_verify_locations(cadata=_pem_text(str(certificates)))
    except (ssl.SSLError, ValueError) as exc:
        key = "ssl.truststore.location" if location is not None else "ssl.truststore.certificates"
        raise ConfigError(name(key), f"no usable CA certificate ({getattr(exc, 'reason', None) or exc})") from None
    except OSError as exc:
        raise ConfigError(name("ssl.truststore.location"), f"cannot read {location}: {exc.strerror or exc}") from None
