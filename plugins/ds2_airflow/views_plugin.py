"""The autoscaler's pages in the Airflow UI: a view per job (a tab on its DAGs' pages) and the fleet page.

Served by the api-server under ``/ds2-views/``; the pages and the data come from the core
(:mod:`autoscaler.observe.pages`, :mod:`autoscaler.observe.series`, :mod:`autoscaler.observe.views`):

- ``/ds2-views/dags/{dag_id}``: the job of that scaling DAG, over ``?hours=`` (default 6)
  or ``?first=&last=`` epochs; ``/dags/{dag_id}/epochs/{epoch}``: one epoch with its reasons;
- ``/ds2-views/fleet``: every job (``?sort=`` a column, ``&desc=1``);
- ``/ds2-views/api/...``: the same data as JSON, for scripts (Python can call the core directly).

Everything needs an authenticated user (Airflow's session cookie or a Bearer token; anonymous: 401);
a job's pages need read access to its DAG, and the fleet lists only jobs whose DAG the user may read.
The tab appears on every DAG's page (Airflow has no per-DAG tabs): on a DAG that scales no job it
says so.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag, requires_authenticated
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, JSONResponse, Response

from autoscaler.config.jobs import JobConfig, config_path, load_jobs
from autoscaler.observe.tuning_view import tuning_view
from autoscaler.observe.views import fleet_view, job_alerts, job_view, recent_alerts
from autoscaler.store.parquet import epoch_span
from autoscaler.store.schemas import METRICS
from ds2_airflow.provider_config import export_to_environment
from ds2_airflow.runtime import DOCS_URL_PREFIX, data_dir, docs_dir, store_root

PREFIX = "/ds2-views"
TAB_ROUTE = "ds2-autoscaler"  # the job view's tab: /dags/<dag_id>/plugin/ds2-autoscaler
DagId = Annotated[str, PathParam(pattern=r"^[A-Za-z0-9_.-]{1,250}$")]
MAX_RANGE_EPOCHS = 200_000
RECENT_EPOCHS = 12
DEFAULT_HOURS = 6


def _jobs() -> dict[str, JobConfig]:
    """Each job's scaling DAG id -> its job."""
    return {job.dag_id: job for job in load_jobs(config_path())}


def _job(dag_id: str) -> JobConfig:
    job = _jobs().get(dag_id)
    if job is None:
        raise HTTPException(status_code=404, detail=f"the DAG {dag_id} scales no registered job")
    return job


def _range(job: JobConfig, hours: float | None, first: int | None, last: int | None) -> tuple[int, int, str]:
    """The epochs to show and, when they are not the newest ``hours``, why."""
    interval = job.interval.total_seconds()
    note = ""
    if first is not None or last is not None:
        if first is None or last is None or last < first:
            raise HTTPException(status_code=422, detail="give both first and last epochs, first <= last")
        lo, hi = first, last
    else:
        span = max(1, math.ceil((hours or DEFAULT_HOURS) * 3600 / interval))
        hi = int(time.time() // interval) - 1
        known = epoch_span(store_root(), METRICS, job.name)
        if known is not None and known[1] < hi - span:
            # A job measured long ago (stopped, or a copied store): its newest span, not an empty chart.
            since = datetime.fromtimestamp((known[1] + 1) * interval, tz=UTC)
            hi, note = known[1], f"no epoch recorded since {since:%Y-%m-%d %H:%M} UTC"
        # Nothing before the job's first epoch: those epochs were not lost, the job was not there yet.
        lo = max(hi - span + 1, known[0] if known else hi)
    if hi - lo + 1 > MAX_RANGE_EPOCHS:
        raise HTTPException(status_code=422, detail=f"at most {MAX_RANGE_EPOCHS} epochs per view")
    return lo, hi, note


def _pages() -> ModuleType:
    # altair, jinja2 and pandas load with the first page the api-server serves, not in every process
    # that loads the plugins (the scheduler, the dag-processor and each task parse the DAGs with them).
    from autoscaler.observe import pages

    return pages


def _links(dag_id: str) -> Any:
    return _pages().Links(
        bundle=f"{PREFIX}/static/vega.js",
        epoch_prefix=f"{PREFIX}/dags/{dag_id}/epochs/",
        fleet=f"{PREFIX}/fleet",
    )


def _docs_href(page: str | None) -> str | None:
    if not page:
        return None
    try:
        return f"{DOCS_URL_PREFIX}/{Path(page).resolve().relative_to(docs_dir().resolve()).as_posix()}"
    except ValueError:
        return None


def views_app() -> FastAPI:
    export_to_environment()
    app = FastAPI(title="DS2 autoscaler views", dependencies=[Depends(requires_authenticated())])
    read_dag = [Depends(requires_access_dag("GET"))]
    Hours = Annotated[float | None, Query(gt=0, le=24 * 366)]
    Epoch = Annotated[int | None, Query(ge=0)]

    @app.get("/static/vega.js", include_in_schema=False)
    def bundle() -> Response:
        return Response(_pages().vega_bundle(), media_type="text/javascript", headers={"Cache-Control": "private, max-age=86400"})

    def series_of(dag_id: str, hours: float | None, first: int | None, last: int | None) -> tuple[JobConfig, Any, str]:
        job = _job(dag_id)
        lo, hi, note = _range(job, hours, first, last)
        excluded = (lambda t: any(p.contains(t) for p in job.excluded_periods)) if job.excluded_periods else None
        # The newest epochs' runs may still come, late (the late-runs timetable): pending, not lost.
        pending = int(time.time() // job.interval.total_seconds()) - 1 - job.max_late_epochs
        from autoscaler.observe.series import job_series

        series = job_series(store_root(), job.name, job.interval.total_seconds(), lo, hi, excluded=excluded, pending_from=pending)
        return job, series, note

    @app.get("/dags/{dag_id}", dependencies=read_dag, response_class=HTMLResponse)
    def job_page(dag_id: DagId, hours: Hours = None, first: Epoch = None, last: Epoch = None) -> HTMLResponse:
        if dag_id not in _jobs():
            return HTMLResponse(f"<p>The DAG {dag_id} scales no registered job: the autoscaler's view is on its jobs' DAGs.</p>")
        job, series, note = series_of(dag_id, hours, first, last)
        recent = job_view(
            store_root(), job.name, series.interval_s, max(series.first, series.last - RECENT_EPOCHS + 1), series.last
        )
        subtitle = (f"Flink job {job.flink_job_name} · policy {job.policy.kind} · every {job.interval}"
                    f"{' · recommendation only' if job.recommendation_only else ''}{' · ' + note if note else ''}")  # fmt: skip
        tuning = tuning_view(store_root(), job.name)
        html = _pages().job_page(series, title=job.name, subtitle=subtitle, links=_links(dag_id),
                              hours=None if first is not None else (hours or DEFAULT_HOURS), recent=recent,
                              tuning=tuning)  # fmt: skip
        return HTMLResponse(html)

    @app.get("/dags/{dag_id}/epochs/{epoch}", dependencies=read_dag, response_class=HTMLResponse)
    def epoch_page(dag_id: DagId, epoch: Annotated[int, PathParam(ge=0)]) -> HTMLResponse:
        job = _job(dag_id)
        (view,) = job_view(store_root(), job.name, job.interval.total_seconds(), epoch, epoch)
        run_href = f"/dags/{job.dag_id}/runs/{view.run_id}" if view.run_id else None
        html = _pages().epoch_page(view, title=job.name, links=_links(dag_id), job_href=f"{PREFIX}/dags/{dag_id}",
                                run_href=run_href, docs_href=_docs_href(view.docs_page))  # fmt: skip
        return HTMLResponse(html)

    @app.get("/api/dags/{dag_id}/series", dependencies=read_dag)
    def series_json(dag_id: DagId, hours: Hours = None, first: Epoch = None, last: Epoch = None) -> JSONResponse:
        _, series, note = series_of(dag_id, hours, first, last)
        return JSONResponse(series.as_dict() | {"note": note})

    @app.get("/api/dags/{dag_id}/epochs/{epoch}", dependencies=read_dag)
    def epoch_json(dag_id: DagId, epoch: Annotated[int, PathParam(ge=0)]) -> JSONResponse:
        job = _job(dag_id)
        (view,) = job_view(store_root(), job.name, job.interval.total_seconds(), epoch, epoch)
        return JSONResponse(_jsonable(asdict(view)))

    def fleet(user: Any) -> tuple[list[Any], dict[str, str], dict[str, list[dict[str, Any]]]]:
        readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET")
        jobs = [j for j in load_jobs(config_path()) if j.dag_id in readable]
        rows = fleet_view(store_root(), [(j.name, j.interval.total_seconds()) for j in jobs], datetime.now(UTC))
        hrefs = {j.name: f"/dags/{j.dag_id}/plugin/{TAB_ROUTE}" for j in jobs}
        by_dag = recent_alerts(data_dir() / "alerts.jsonl", since_s=86_400)
        return rows, hrefs, {j.name: job_alerts(by_dag, j.name, j.dag_id) for j in jobs}

    @app.get("/fleet", response_class=HTMLResponse)
    def fleet_page(user: GetUserDep, sort: Annotated[str, Query(pattern=r"^[a-z]{1,16}$")] = "gap",
                   desc: Annotated[int, Query(ge=0, le=1)] = 1) -> HTMLResponse:  # fmt: skip
        columns = _pages().FLEET_COLUMNS
        if sort not in columns:
            raise HTTPException(status_code=422, detail=f"sort is one of {', '.join(columns)}")
        rows, hrefs, alerts = fleet(user)
        html = _pages().fleet_page(rows, hrefs=hrefs, alerts=alerts, sort=sort, descending=bool(desc),
                                links=_links("~"), now=datetime.now(UTC))  # fmt: skip
        return HTMLResponse(html)

    @app.get("/api/fleet")
    def fleet_json(user: GetUserDep) -> JSONResponse:
        rows, _, alerts = fleet(user)
        return JSONResponse([_jsonable(asdict(r) | {"gap": r.gap, "alerts": len(alerts[r.job])}) for r in rows])

    return app


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class DS2ViewsPlugin(AirflowPlugin):
    name = "ds2_views"
    fastapi_apps = [{"app": views_app(), "url_prefix": PREFIX, "name": "DS2 autoscaler views"}]  # noqa: RUF012
    external_views = [  # noqa: RUF012
        {"name": "Autoscaler", "href": f"{PREFIX}/dags/{{DAG_ID}}", "destination": "dag", "url_route": TAB_ROUTE},
        {"name": "Autoscaler fleet", "href": f"{PREFIX}/fleet", "destination": "nav", "url_route": "ds2-fleet"},
    ]
