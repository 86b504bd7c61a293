"""Confluent's error answers: an HTTP status, a five-digit `error_code` and a message, in Confluent's JSON
shape (`{"error_code": 40401, "message": "..."}`). The codes are Confluent's facts; clients such as
confluent-kafka's `SchemaRegistryClient` raise them as `SchemaRegistryError.error_code`.

Pure values: any thread may use them.
"""

from __future__ import annotations

import json

#: code -> (HTTP status, Confluent's default message)
CODES: dict[int, tuple[int, str]] = {
    401: (401, "Unauthorized"),
    40301: (403, "User is denied operation on this resource"),
    40401: (404, "Subject not found."),
    40402: (404, "Version not found."),
    40403: (404, "Schema not found"),
    40404: (404, "Subject was soft deleted. Set permanent=true to delete permanently"),
    40405: (404, "Subject was not deleted first before being permanently deleted"),
    40406: (404, "Version was soft deleted. Set permanent=true to delete permanently"),
    40407: (404, "Version was not deleted first before being permanently deleted"),
    40408: (404, "Subject level compatibility not configured"),
    40409: (404, "Subject level mode not configured"),
    404: (404, "HTTP 404 Not Found"),
    405: (405, "HTTP 405 Method Not Allowed"),
    409: (409, "Schema being registered is incompatible with an earlier schema"),
    413: (413, "Request body too large"),
    415: (415, "HTTP 415 Unsupported Media Type"),
    422: (422, "Unprocessable entity"),
    42201: (422, "Invalid schema"),
    42202: (422, "Invalid version"),
    42203: (422, "Invalid compatibility level"),
    42204: (422, "Invalid mode"),
    42205: (422, "Operation not permitted"),
    42206: (422, "One or more references exist to the schema"),
    50001: (500, "Error in the backend data store"),
    50002: (500, "Operation timed out"),
}


class RegistryError(Exception):
    """An answer other than success: raise it anywhere under a route; the server turns it into JSON."""

    def __init__(self, code: int, message: str | None = None) -> None:
        status, default = CODES[code]
        super().__init__(message or default)
        self.code = code
        self.status = status
        self.message = message or default

    def body(self) -> bytes:
        return json.dumps({"error_code": self.code, "message": self.message}).encode()
