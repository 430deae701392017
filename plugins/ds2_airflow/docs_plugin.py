"""Serve the GX Data Docs of validated epochs from the Airflow api-server, under ``/ds2-docs/``.

The approval form links the validation result of the epoch it asks about; without this the
link would be a path on the worker's disk. The pages are static HTML written by the validate
task into ``<DS2_DATA_DIR>/validation-docs`` (metric values and rule outcomes).

They sit behind Airflow's own authentication, like every other page of the api-server: a
request needs the session cookie the UI holds after login, or an ``Authorization: Bearer``
token; an anonymous one gets 401. Paths are resolved inside the docs folder only.
"""

from __future__ import annotations

from pathlib import Path

from airflow.api_fastapi.core_api.security import requires_authenticated
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse

from ds2_airflow.provider_config import export_to_environment
from ds2_airflow.runtime import DOCS_URL_PREFIX, docs_dir


def docs_page(folder: Path, path: str) -> Path:
    """The file ``path`` names inside ``folder`` (a folder means its index.html); 404 outside or missing."""
    root = folder.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise HTTPException(status_code=404, detail="not found")
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        raise HTTPException(status_code=404, detail="not found")
    return target


def docs_app() -> FastAPI:
    export_to_environment()
    folder = docs_dir()
    folder.mkdir(parents=True, exist_ok=True)
    app = FastAPI(title="DS2 validation Data Docs", dependencies=[Depends(requires_authenticated())])

    @app.get("/{path:path}", include_in_schema=False)
    def page(path: str) -> FileResponse:
        return FileResponse(docs_page(folder, path))

    return app


class DS2DocsPlugin(AirflowPlugin):
    name = "ds2_validation_docs"
    fastapi_apps = [{"app": docs_app(), "url_prefix": DOCS_URL_PREFIX, "name": "DS2 validation Data Docs"}]  # noqa: RUF012
