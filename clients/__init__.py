"""What runs outside the broker process: the `pybroker` admin commands, the PySpark connector, and the one
blocking wire client both use.

- `wire`: the Kafka client over `pybroker.protocol`'s codecs (TLS, SASL, ApiVersions, correlation ids,
  timeouts, a cap on every answer's size); `sasl`: its PLAIN and SCRAM client side; `client_config`:
  Kafka's client security keys (`--command-config`).
- `admin`: the command-line tools (docs/cli.md).
- `spark`: the `pybroker` data source for Spark 4's Python Data Source API.

Layering: clients use `protocol` and `config`, and of `storage` only `storage.offline` (the file formats the
offline tools read); never the server (`pybroker.broker`). The server imports none of this package but for
the command-line entry point, which hands every command except `start` to `admin`.
"""
