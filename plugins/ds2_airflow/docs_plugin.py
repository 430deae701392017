"""Serve the GX Data Docs of validated epochs from the Airflow api-server, under ``/ds2-docs/``.

The approval form links the validation result of the epoch it asks about; without this the
link would be a path on the worker's disk. The pages are static HTML written by the validate
task into ``<DS2_DATA_DIR>/validation-docs`` (metric values and rule outcomes, no secrets).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from ds2_airflow.runtime import DOCS_URL_PREFIX, docs_dir


def docs_app() -> FastAPI:
    folder = docs_dir()
    folder.mkdir(parents=True, exist_ok=True)
    app = FastAPI(title="DS2 validation Data Docs")
    app.mount("/", StaticFiles(directory=str(folder), html=True), name="validation-docs")
    return app


class DS2DocsPlugin(AirflowPlugin):
    name = "ds2_validation_docs"
    fastapi_apps = [{"app": docs_app(), "url_prefix": DOCS_URL_PREFIX, "name": "DS2 validation Data Docs"}]  # noqa: RUF012
