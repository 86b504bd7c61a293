"""Names for partition dirs renamed aside: Kafka's `<topic>-<partition>.<uuid><suffix>`, at most 255 bytes.

A deleted partition's dir is renamed `...-delete` before it is removed, an unclaimed one `...-stray`.
A legal topic name has up to 249 characters, so appending the 32-character uuid and the suffix to the
dir name could pass the 255-byte limit of a file name (ENAMETOOLONG): as Kafka does
(`LogFileUtils.logDeleteDirName`), the topic part is cut short instead, so the name still ends in the
suffix that startup recognises.
"""

from __future__ import annotations

import os
import uuid

#: the longest file name (in bytes) Linux file systems take
MAX_NAME_BYTES = 255


def renamed_dir_name(dir_name: str, suffix: str) -> str:
    """The name to rename partition dir `dir_name` (`<topic>-<partition>`) to, ending in `suffix`."""
    topic, dash, partition = dir_name.rpartition("-")
    if not dash:
        topic, partition = dir_name, ""
    tail = f"{dash}{partition}.{uuid.uuid4().hex}{suffix}"
    room = max(MAX_NAME_BYTES - len(os.fsencode(tail)), 0)
    return os.fsdecode(os.fsencode(topic)[:room]) + tail
