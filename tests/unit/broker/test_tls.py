"""TLS listeners in process: contexts from each PEM form, clear errors, principals, per-listener
Metadata, and key store reloads that keep existing connections."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.dynamic_configs import NODE
from pybroker.broker.send_queue import CopyingWriter
from pybroker.broker.tls import build_context
from pybroker.config.broker_config import BrokerConfig
from pybroker.config.types import ConfigError
from pybroker.protocol.messages.metadata import MetadataRequest
from tests.certs import (
    KEY_PASSWORD,
    RENEWED_SERIAL,
    SERVER_SERIAL,
    CertSet,
    make_certs,
    openssl_available,
    serial_of,
)
from tests.unit.broker.conftest import RawClient

pytestmark = pytest.mark.skipif(not openssl_available(), reason="needs the openssl command")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _config(tmp_path: Path, **overrides: str) -> BrokerConfig:
    return BrokerConfig.load({"log.dirs": str(tmp_path / "data"),
                              "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **overrides})


def _ssl_keys(certs: CertSet, prefix: str = "") -> dict[str, str]:
    return {f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": str(certs.server_keystore)}


def _handshake_ok(context: ssl.SSLContext, certs: CertSet, client: str | None = None) -> None:
    """A memory-BIO handshake between `context` and a client: proves the context serves."""
    client_ctx = certs.client_context(client)
    cin, cout = ssl.MemoryBIO(), ssl.MemoryBIO()
    peer = client_ctx.wrap_bio(cin, cout, server_hostname="localhost")
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = context.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):
        done = 0
        for obj in (peer, server):
            try:
                obj.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        server_in.write(cout.read())
        cin.write(server_out.read())
        if done == 2:
            return
    raise AssertionError("handshake did not complete")


@pytest.mark.parametrize("form", ["location", "encrypted", "inline"])
def test_context_from_each_pem_form(tmp_path: Path, certs: CertSet, form: str) -> None:
    keys = {"ssl.keystore.type": "PEM"}
    if form == "location":
        keys["ssl.keystore.location"] = str(certs.server_keystore)
    elif form == "encrypted":
        keys.update({"ssl.keystore.location": str(certs.server_keystore_encrypted), "ssl.key.password": KEY_PASSWORD})
    else:
        keys.update({"ssl.keystore.certificate.chain": certs.path("server.pem").read_text(),
                     "ssl.keystore.key": certs.path("server.key").read_text()})
    _handshake_ok(build_context(_config(tmp_path, **keys), "SSL"), certs)


def test_inline_pem_on_one_line_as_a_properties_file_may_hold_it(tmp_path: Path, certs: CertSet) -> None:
    one_line = {key: certs.path(name).read_text().replace("\n", " ").strip()
                for key, name in (("ssl.keystore.certificate.chain", "server.pem"), ("ssl.keystore.key", "server.key"))}
    _handshake_ok(build_context(_config(tmp_path, **{"ssl.keystore.type": "PEM"}, **one_line), "SSL"), certs)


def test_per_listener_prefix_wins(tmp_path: Path, certs: CertSet) -> None:
    config = _config(tmp_path, **{"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem",
                                  "listener.name.ssl.ssl.keystore.location": str(certs.server_keystore)})
    assert config.listener_get("SSL", "ssl.keystore.location") == str(certs.server_keystore)
    assert config.listener_key("SSL", "ssl.keystore.location") == "listener.name.ssl.ssl.keystore.location"
    assert config.listener_get("OTHER", "ssl.keystore.location") == "/nonexistent.pem"
    _handshake_ok(build_context(config, "SSL"), certs)


@pytest.mark.parametrize(("keys", "named", "says"), [
    ({"ssl.keystore.location": "ENCRYPTED", "ssl.key.password": "wrong"}, "ssl.key.password", "wrong password"),
    ({"ssl.keystore.location": "ENCRYPTED"}, "ssl.key.password", "no password"),
    ({"ssl.keystore.location": "/no/such/file.pem"}, "ssl.keystore.location", "no such file"),
    ({}, "ssl.keystore.location", "needs a key store"),
    ({"ssl.keystore.location": "CA"}, "ssl.keystore.location", "cannot load"),
    ({"ssl.keystore.location": "PLAIN", "ssl.keystore.type": "JKS"}, "ssl.keystore.type", "PEM"),
    ({"ssl.keystore.location": "PLAIN", "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
      "ssl.truststore.location": "PLAIN-KEY"}, "ssl.truststore.location", "no usable CA"),
    ({"ssl.keystore.location": "PLAIN", "ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}, "ssl.cipher.suites", "unknown"),
    ({"ssl.keystore.location": "PLAIN", "ssl.enabled.protocols": "TLSv1,TLSv1.1"}, "ssl.enabled.protocols",
     "none of TLSv1, TLSv1.1"),
    ({"ssl.keystore.location": "PLAIN", "ssl.keystore.password": "secret"}, "ssl.keystore.password",
     "no store password"),
])
def test_bad_material_names_the_key_and_never_the_password(tmp_path: Path, certs: CertSet, keys: dict[str, str],
                                                           named: str, says: str) -> None:
    files = {"ENCRYPTED": certs.server_keystore_encrypted, "PLAIN": certs.server_keystore, "CA": certs.ca,
             "PLAIN-KEY": certs.path("server.key")}
    settings = {"ssl.keystore.type": "PEM",
                **{key: str(files.get(value, value)) for key, value in keys.items()}}
    with pytest.raises(ConfigError) as caught:
        build_context(_config(tmp_path, **settings), "SSL")
    assert caught.value.key == named
    assert says in caught.value.message
    assert "wrong" not in str(caught.value).replace("wrong password", "")  # the password's value never


def test_a_listener_prefixed_error_names_the_prefixed_key(tmp_path: Path, certs: CertSet) -> None:
    config = _config(tmp_path, **{"listener.name.ssl.ssl.keystore.type": "PEM",
                                  "listener.name.ssl.ssl.keystore.location": "/missing.pem"})
    with pytest.raises(ConfigError) as caught:
        build_context(config, "SSL")
    assert caught.value.key == "listener.name.ssl.ssl.keystore.location"


def test_enabled_protocols_and_cipher_suites(tmp_path: Path, certs: CertSet) -> None:
    context = build_context(_config(tmp_path, **_ssl_keys(certs), **{
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"}),
        "SSL")
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_2
    names = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"}
    _handshake_ok(context, certs)


# -- in process: a PLAINTEXT and an SSL listener side by side ---------------------------------------------
@pytest.fixture
async def tls_app(tmp_path: Path, certs: CertSet) -> AsyncIterator[BrokerApp]:
    keystore = tmp_path / "keystore.pem"
    shutil.copy(certs.server_keystore, keystore)
    config = _config(tmp_path, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca), "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U,DEFAULT"})
    broker = BrokerApp(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


async def _connect(app: BrokerApp, certs: CertSet, listener: int, client: str | None = None) -> RawClient:
    context = certs.client_context(client) if listener == 1 else None
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[listener], ssl=context,
                                                   server_hostname="localhost" if context else None)
    return RawClient(reader, writer)


async def test_metadata_advertises_the_listener_the_client_came_in_on(tls_app: BrokerApp, certs: CertSet) -> None:
    for listener in (0, 1):
        client = await _connect(tls_app, certs, listener)
        try:
            answer = await client.call(MetadataRequest(topics=[]), 12)
            assert [(b.host, b.port) for b in answer.brokers] == [("127.0.0.1", tls_app.bound_ports[listener])]
        finally:
            client.close()


async def test_principal_from_the_client_certificate(tls_app: BrokerApp, certs: CertSet) -> None:
    with_cert = await _connect(tls_app, certs, 1, "client")
    without = await _connect(tls_app, certs, 1)
    plain = await _connect(tls_app, certs, 0)
    try:
        for client in (with_cert, without, plain):
            await client.call(MetadataRequest(topics=[]), 12)
        by_port = {(c.peer, c.listener, c.security_protocol): c.principal for c in tls_app.state.connections}
        principals = sorted((listener, protocol, principal) for (_, listener, protocol), principal in by_port.items())
        # the DN is CN=alice,OU=eng,O=Example,C=US; the rule keeps CN@OU, upper case
        assert principals == [("PLAINTEXT", "PLAINTEXT", "User:ANONYMOUS"), ("SSL", "SSL", "User:ALICE@ENG"),
                              ("SSL", "SSL", "User:ANONYMOUS")]
    finally:
        for client in (with_cert, without, plain):
            client.close()


async def test_fetch_over_tls_never_uses_sendfile(tls_app: BrokerApp, certs: CertSet) -> None:
    client = await _connect(tls_app, certs, 1)
    try:
        await client.call(MetadataRequest(topics=[]), 12)
        [conn] = [c for c in tls_app.state.connections if c.listener == "SSL"]
        assert isinstance(conn.writer, CopyingWriter)  # encrypted bytes: regions are read, never spliced
    finally:
        client.close()


async def test_key_store_file_replaced_new_connections_get_the_new_certificate(
        tls_app: BrokerApp, certs: CertSet, tmp_path: Path) -> None:
    old = await _connect(tls_app, certs, 1)
    try:
        assert serial_of(old.writer.get_extra_info("ssl_object").getpeercert(True)) == SERVER_SERIAL
        shutil.copy(certs.renewed_server_keystore, tmp_path / "new.pem")
        (tmp_path / "new.pem").replace(tmp_path / "keystore.pem")  # atomic, as an operator's tooling does
        assert tls_app.listeners is not None
        tls_app.listeners.check_key_stores()
        new = await _connect(tls_app, certs, 1)
        try:
            assert serial_of(new.writer.get_extra_info("ssl_object").getpeercert(True)) == RENEWED_SERIAL
            assert (await new.call(MetadataRequest(topics=[]), 12)).brokers
        finally:
            new.close()
        assert (await old.call(MetadataRequest(topics=[]), 12)).brokers  # the old connection goes on
    finally:
        old.close()


async def test_dynamic_key_store_update_is_checked_then_applied(tls_app: BrokerApp, certs: CertSet) -> None:
    dynamic = tls_app.state.dynamic_configs
    with pytest.raises(ConfigError) as caught:
        dynamic.replace(NODE, {"listener.name.ssl.ssl.keystore.location": str(certs.ca)})
    assert caught.value.key == "listener.name.ssl.ssl.keystore.location"
    assert tls_app.config.listener_get("SSL", "ssl.keystore.location").endswith("keystore.pem")
    dynamic.replace(NODE, {"listener.name.ssl.ssl.keystore.location": str(certs.renewed_server_keystore)})
    client = await _connect(tls_app, certs, 1)
    try:
        assert serial_of(client.writer.get_extra_info("ssl_object").getpeercert(True)) == RENEWED_SERIAL
    finally:
        client.close()


async def test_a_key_store_set_at_runtime_is_used_after_a_restart(tls_app: BrokerApp, certs: CertSet) -> None:
    tls_app.state.dynamic_configs.replace(NODE, {"ssl.keystore.location": str(certs.renewed_server_keystore)})
    await tls_app.stop()
    again = BrokerApp(BrokerConfig.load({**{k: str(v) if not isinstance(v, list) else ",".join(v)
                                            for k, v in tls_app.config.explicit.items()}}))
    await again.start()
    try:
        client = await _connect(again, certs, 1)
        try:
            assert serial_of(client.writer.get_extra_info("ssl_object").getpeercert(True)) == RENEWED_SERIAL
        finally:
            client.close()
    finally:
        await again.stop()


@pytest.mark.parametrize("form", ["location", "inline"])
def test_required_client_auth_trusts_our_ca_only(tmp_path: Path, certs: CertSet, form: str) -> None:
    trust = {"ssl.truststore.location": str(certs.ca)} if form == "location" else \
        {"ssl.truststore.certificates": certs.ca.read_text()}
    context = build_context(_config(tmp_path, **_ssl_keys(certs), **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM", **trust}), "SSL")
    assert context.verify_mode == ssl.CERT_REQUIRED
    _handshake_ok(context, certs, "client")
    for refused in (None, "stranger"):
        with pytest.raises(ssl.SSLError):
            _handshake_ok(context, certs, refused)
