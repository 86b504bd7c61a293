"""Iceberg topics: the worker process that keeps an Apache Iceberg table of a topic (docs/iceberg.md).

It runs beside the broker (`broker/iceberg_tables.py` starts and supervises it) and needs the `iceberg`
extra (pyiceberg, pyarrow); the broker itself never imports it.
"""
