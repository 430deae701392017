"""Serve the GX Data Docs of validated epochs from the Airflow api-server, under ``/ds2-docs/``.

The approval form links the validation result of the epoch it asks about; without this the
link would be a path on the worker's disk. The pages are static HTML written by the validate
task into ``<DS2_DATA_DIR>/validation-docs`` (metric values and rule outcomes).

They sit behind Airflow's own authentication, like every other page of the api-server: a
request needs the session cookie the UI holds after login, or an ``Authorization: Bearer``
token; an anonymous one gets 401. Paths are resolved inside the docs folder only.

A page of one job's validations or expectations (``validations/<suite>/<job>/...``,
``expectations/<suite>/<job>.html``) is served to a user who may read that job's DAG, as the job
views are; the site's index and any other page, which list every job, only to a user who may read
every registered job's DAG. Styles, fonts and images are served to any logged-in user.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep, requires_authenticated
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse

from autoscaler.config.jobs import config_path, load_jobs
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


STATIC = "static"


def page_job(path: str) -> str | None:
    """The job a Data Docs page shows: a name, STATIC for the site's assets, None for a page of every job."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["static"]:
        return STATIC
    if len(parts) >= 4 and parts[0] == "validations":
        return parts[2]
    if len(parts) == 3 and parts[0] == "expectations" and parts[2].endswith(".html"):
        return parts[2].removesuffix(".html")
    return None


def may_read(path: str, can_read: Callable[[str], bool], dag_ids: dict[str, str]) -> bool:
    """Whether a user may read the page: ``can_read(dag_id)`` asks the auth manager about one DAG (whether or
    not it is in the metadata DB yet); ``dag_ids`` maps the registered jobs to their DAGs."""
    job = page_job(path)
    if job == STATIC:
        return True
    if job is not None and job in dag_ids:
        return can_read(dag_ids[job])
    return all(can_read(dag_id) for dag_id in dag_ids.values())


def docs_app() -> FastAPI:
    export_to_environment()
    folder = docs_dir()
    folder.mkdir(parents=True, exist_ok=True)
    app = FastAPI(title="DS2 validation Data Docs", dependencies=[Depends(requires_authenticated())])

    @app.get("/{path:path}", include_in_schema=False)
    def page(path: str, user: GetUserDep) -> FileResponse:
        target = docs_page(folder, path)
        if page_job(path) != STATIC:
            manager = get_auth_manager()

            def can_read(dag_id: str) -> bool:
                return manager.is_authorized_dag(method="GET", user=user, details=DagDetails(id=dag_id))

            if not may_read(path, can_read, {job.name: job.dag_id for job in load_jobs(config_path())}):
                raise HTTPException(status_code=403, detail="no read access to the DAG of the job this page shows")
        return FileResponse(target)

    return app


class DS2DocsPlugin(AirflowPlugin):
    name = "ds2_validation_docs"
    fastapi_apps = [{"app": docs_app(), "url_prefix": DOCS_URL_PREFIX, "name": "DS2 validation Data Docs"}]  # noqa: RUF012
