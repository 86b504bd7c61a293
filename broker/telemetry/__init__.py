"""Client telemetry (KIP-714): subscriptions configured as client-metrics resources, client instances
that ask for them and push their metrics, and the pushed metrics on our Prometheus endpoint."""
