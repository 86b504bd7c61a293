"""Prometheus metrics: request instruments on the hot path, everything else computed at scrape time.

- `requests`: per-request counters and the latency histogram, children precomputed per (api, version).
- `response_errors`: the error codes a response carries, found by a per-class plan.
- `traffic`: per-topic byte and message counts as plain ints, which handlers bump cheaply.
- `groups`: the provider interface for group figures and consumer lag (the coordinator plugs in).
- `collector`: families computed from broker state when Prometheus scrapes.
- `http_server`: `/metrics`, `/healthz`, `/readyz` on the event loop.
"""
