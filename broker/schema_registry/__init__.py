"""The schema registry the broker serves (docs/schema-registry.md): Confluent's REST API on a port of its own,
its state in the compacted `_schemas` topic in Confluent's key/value format, and the produce-time check of
topics whose `confluent.key.schema.validation` / `confluent.value.schema.validation` is on."""
