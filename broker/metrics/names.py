"""Label values for APIs and error codes, computed once so the hot path never formats a string.

Kafka's own metrics name requests in CamelCase (`request=Produce`, `request=ApiVersions`) and errors by
their upper-case names (`error=UNKNOWN_TOPIC_OR_PARTITION`); dashboards written for Kafka read the same.
"""

from __future__ import annotations

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


API_NAMES: dict[int, str] = {int(key): _camel(key.name) for key in ApiKey}
ERROR_NAMES: dict[int, str] = {int(code): code.name for code in ErrorCode}


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key) or f"Api{api_key}"


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code) or f"ERROR_{code}"
