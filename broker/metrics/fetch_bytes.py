"""Record bytes sent to clients, by how they left: spliced from the segment file by `os.sendfile`, or
copied into the process first (TLS, or a file sendfile cannot splice). The share sent by sendfile is
what "fetch stays zero-copy" means; `make bench` prints it.
"""

from __future__ import annotations

from prometheus_client import Counter

FETCH_BYTES = Counter("pybroker_fetch_bytes",
                      "Bytes of segment files sent to clients, by path: sendfile (never copied into the broker) "
                      "or copy (read into memory first: TLS listeners, files sendfile cannot splice).", ["path"])
#: the two children, looked up once (the hot path only calls `inc`)
SENDFILE = FETCH_BYTES.labels("sendfile")
COPIED = FETCH_BYTES.labels("copy")
