"""A log dir's identity and ownership files, as Kafka lays them out.

- `.lock`: held with `flock` for the broker's lifetime, so a second broker on the same dir fails fast.
- `meta.properties`: `version=1`, `cluster.id`, `node.id`, `directory.id`. Written once; a dir that
  names another node, or dirs that disagree on the cluster, stop startup with a clear error.
- `.kafka_cleanshutdown`: written (fsynced) last at a clean shutdown and removed (durably) at startup
  once the logs are loaded; its presence means the indexes and recovery points can be trusted.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import uuid
from pathlib import Path

from pybroker.storage.errors import LogDirLockedError, MetaPropertiesError
from pybroker.storage.files import atomic_write, fsync_dir

LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
#: what Kafka's `CleanShutdownFileHandler` writes (we have no broker epoch)
CLEAN_SHUTDOWN_CONTENT = b'{"version":"0","broker_epoch":"-1"}'


def new_kafka_id() -> str:
    """A random id in Kafka's text form (URL-safe base64 of 16 bytes, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def lock_dir(directory: Path) -> int:
    """Take the dir's lock; returns the descriptor holding it (close it to release)."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirLockedError(f"log dir {directory} is in use by another broker process "
                                f"(its {LOCK_FILE} is locked)") from None
    return fd


def unlock_dir(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def read_meta_properties(directory: Path) -> dict[str, str] | None:
    """The key=value pairs of `meta.properties`; None when the file does not exist."""
    path = directory / META_PROPERTIES
    try:
        text = path.read_bytes().decode()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise MetaPropertiesError(f"cannot read {path}: {exc}") from None
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


def ensure_meta_properties(dirs: list[Path], node_id: int) -> str:
    """Check every dir's `meta.properties` against `node_id` and each other; write the missing ones.

    Returns the cluster id (the existing one, or a new one for fresh dirs).
    """
    cluster_id = ""
    for directory in dirs:
        props = read_meta_properties(directory)
        if props is None:
            continue
        path = directory / META_PROPERTIES
        found_node = props.get("node.id", props.get("broker.id"))
        if found_node is not None and found_node != str(node_id):
            raise MetaPropertiesError(f"{path} belongs to node.id={found_node}, but this broker is node.id="
                                      f"{node_id}; use the right node.id or another log dir")
        found_cluster = props.get("cluster.id", "")
        if cluster_id and found_cluster and found_cluster != cluster_id:
            raise MetaPropertiesError(f"{path} has cluster.id={found_cluster}, but other log dirs have "
                                      f"cluster.id={cluster_id}")
        cluster_id = cluster_id or found_cluster
    cluster_id = cluster_id or new_kafka_id()
    for directory in dirs:
        if not (directory / META_PROPERTIES).exists():
            text = (f"#\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
                    f"directory.id={new_kafka_id()}\n")
            atomic_write(directory / META_PROPERTIES, text.encode())
    return cluster_id


def had_clean_shutdown(directory: Path) -> bool:
    return (directory / CLEAN_SHUTDOWN).exists()


def clear_clean_shutdown(directory: Path) -> None:
    """Remove the marker durably: a crash from now on must not look like a clean shutdown."""
    path = directory / CLEAN_SHUTDOWN
    if path.exists():
        path.unlink()
        fsync_dir(directory)


def mark_clean_shutdown(directory: Path) -> None:
    atomic_write(directory / CLEAN_SHUTDOWN, CLEAN_SHUTDOWN_CONTENT)
