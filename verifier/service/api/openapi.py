"""The OpenAPI document: FastAPI's, with the report's own JSON Schema as the submit body.

Parameters that do not validate answer our 400 in the error shape, so FastAPI's 422
and its validation schemas leave the document; a 422 a route declares itself (a report
naming an unknown task) stays.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from verifier import resources

REPORT_SCHEMA = resources.report_schema_file()


def document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with the report's JSON Schema as the body of ``POST /v1/sessions``."""
    if app.openapi_schema:
        return app.openapi_schema
    document = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            # Parameters that do not validate are our 400 in the error shape, not FastAPI's 422.
            responses = operation.get("responses", {})
            if _is_fastapis(responses.get("422")):
                responses.pop("422")
                responses.setdefault("400", _ERROR_RESPONSE)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    report = json.loads(REPORT_SCHEMA.read_text(encoding="utf-8"))
    definitions = report.pop("$defs", {})
    for key in ("$schema", "$id"):
        report.pop(key, None)
    schemas["SessionReport"] = _rebase(report)
    for name, schema in definitions.items():
        schemas[f"SessionReport{name}"] = _rebase(schema)
    app.openapi_schema = document
    return document


def _is_fastapis(response: Any) -> bool:
    """FastAPI's own 422 (its validation error body), not one a route declares (a report
    naming an unknown task answers 422 in our error shape)."""
    if not isinstance(response, dict):
        return False
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    return bool(schema.get("$ref") == "#/components/schemas/HTTPValidationError")


_ERROR_RESPONSE = {
    "description": "Bad request: the field or parameter named is not valid.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
}


def _rebase(node: Any) -> Any:
    """The report schema's ``#/$defs/X`` references, pointed at the OpenAPI components."""
    if isinstance(node, dict):
        return {
            k: (
                "#/components/schemas/SessionReport" + v.removeprefix("#/$defs/")
                if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/")
                else _rebase(v)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rebase(v) for v in node]
    return node
