"""Test certificates made with the `openssl` command: a CA, a server certificate for 127.0.0.1 and
localhost, client certificates, and a second CA whose client certificate the broker must refuse.

Every file is PEM as Kafka's `ssl.keystore.type=PEM` takes it: a key store is the PKCS#8 private key
followed by the certificate chain; `*-encrypted.pem` has its key encrypted with `KEY_PASSWORD`.
EC P-256 keys keep generation fast (a whole set takes well under a second).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

KEY_PASSWORD = "test-key-secret"
SERVER_SERIAL = 0x1001
RENEWED_SERIAL = 0x1002
#: the client certificate's subject, in openssl's order (most general first)
CLIENT_SUBJECT = "/C=US/O=Example/OU=eng/CN=alice"
CLIENT_DN = "CN=alice,OU=eng,O=Example,C=US"


def openssl_available() -> bool:
    return shutil.which("openssl") is not None


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class CertSet:
    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def ca(self) -> Path:
        return self.path("ca.pem")

    @property
    def server_keystore(self) -> Path:
        return self.path("server-keystore.pem")

    @property
    def server_keystore_encrypted(self) -> Path:
        return self.path("server-keystore-encrypted.pem")

    @property
    def renewed_server_keystore(self) -> Path:
        return self.path("renewed-keystore.pem")

    def client(self, name: str = "client") -> tuple[Path, Path]:
        """(certificate, key) of a client: `client` (our CA) or `stranger` (the other CA)."""
        return self.path(f"{name}.pem"), self.path(f"{name}.key")

    def client_context(self, name: str | None = None) -> ssl.SSLContext:
        """A client context trusting our CA, with a client certificate when `name` is given."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if name is not None:
            cert, key = self.client(name)
            context.load_cert_chain(str(cert), str(key))
        return context


def make_certs(directory: Path) -> CertSet:
    directory.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "3",
                 "-subj", f"/CN=pybroker test {ca}", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                          "extendedKeyUsage=serverAuth\n")
    (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    leaves = (("server", "/CN=localhost", "ca", SERVER_SERIAL, "server.ext"),
              ("renewed", "/CN=localhost", "ca", RENEWED_SERIAL, "server.ext"),
              ("client", CLIENT_SUBJECT, "ca", 0x2001, "client.ext"),
              ("stranger", CLIENT_SUBJECT, "other-ca", 0x3001, "client.ext"))
    for name, subject, ca, serial, ext in leaves:
        _openssl("req", "-new", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
                 cwd=directory)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                 "-set_serial", str(serial), "-days", "2", "-out", f"{name}.pem", "-extfile", ext, cwd=directory)
    for name in ("server", "renewed"):
        keystore = "server-keystore.pem" if name == "server" else "renewed-keystore.pem"
        (directory / keystore).write_text((directory / f"{name}.key").read_text()
                                          + (directory / f"{name}.pem").read_text())
    _openssl("pkcs8", "-topk8", "-in", "server.key", "-out", "server-encrypted.key", "-v2", "aes-256-cbc",
             "-passout", f"pass:{KEY_PASSWORD}", cwd=directory)
    (directory / "server-keystore-encrypted.pem").write_text(
        (directory / "server-encrypted.key").read_text() + (directory / "server.pem").read_text())
    return CertSet(directory)


def serial_of(der: bytes) -> int:
    """The serial number of a DER certificate (as a TLS peer presented it)."""
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"], input=der,
                         check=True, capture_output=True, timeout=30).stdout.decode()
    return int(out.strip().partition("=")[2], 16)
