"""Record bytes sent to clients, by how they left: spliced from the segment file by the kernel (`os.sendfile`,
or `os.splice` through a pipe for large regions: `broker.splice_pipes`), or copied into the process first
(TLS, or a file that cannot be spliced). The share of the first is what "fetch stays zero-copy" means;
`make bench` prints it as the sendfile share.
"""

from __future__ import annotations

from prometheus_client import Counter

FETCH_BYTES = Counter("pybroker_fetch_bytes",
                      "Bytes of segment files sent to clients, by path: sendfile (spliced by the kernel, by sendfile or "
                      "through a pipe, never copied into the broker) or copy (read into memory first: TLS "
                      "listeners, files that cannot be spliced).", ["path"])
#: the two children, looked up once (the hot path only calls `inc`)
SENDFILE = FETCH_BYTES.labels("sendfile")
COPIED = FETCH_BYTES.labels("copy")
