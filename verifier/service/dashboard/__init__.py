"""The dashboard: pages for people at ``/``, served by `verifier serve` beside the API.

`router` is a FastAPI router the API includes; the pages read the store the API
opened (`Store.stats`, `Store.find_sessions`, `Store.listed`, `Store.runs`,
`Store.report_bytes`) and never verify anything themselves.
"""

from verifier.service.dashboard.routes import router

__all__ = ["router"]
