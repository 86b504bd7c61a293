"""The web console the broker serves itself: topics, messages, consumer groups, configs and live charts.

`service.ConsoleService` is what the app starts; `routes.ConsoleApp` answers HTTP requests; reads and
writes go through `local_client.LocalClient` (the Kafka APIs' own handlers, under the ACL table) and the
charts read the metrics' collector. docs/console.md says how to reach it and how it is protected.
"""
