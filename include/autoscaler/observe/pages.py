"""The job view and the fleet page as HTML: Vega-Lite charts (built with altair) and Jinja2 templates.

Pure: given the read API's data (:mod:`autoscaler.observe.series`, :mod:`autoscaler.observe.views`)
and the URLs to link to, each function returns a page. The Airflow plugin
(``plugins/ds2_airflow/views_plugin.py``) serves them behind Airflow's authentication; the charts
are drawn in the browser by vega-embed from the bundle :func:`vega_bundle` gives (vl-convert's
offline bundle: no CDN, which these machines and many clusters cannot reach).

Every chart is embedded as ``<div class="ds2-chart" id="chart-NAME">`` with the SVG renderer, and its
vega view is kept in ``window.ds2Charts[NAME]``, so a test can read each series from the page.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import altair as alt
import jinja2

from autoscaler.observe.series import EXCLUDED, JobSeries
from autoscaler.observe.tuning_view import TuningView
from autoscaler.observe.views import LOST, QUARANTINED, RECOMMENDATION, WARMUP, EpochView, FleetRow

SHADE_COLORS = {LOST: "#d62728", QUARANTINED: "#ff7f0e", WARMUP: "#bcbd22", RECOMMENDATION: "#17becf", EXCLUDED: "#9467bd"}
OUTCOME_COLORS = {"succeeded": "#2ca02c", "failed": "#d62728", "rolled-back": "#ff7f0e", "rejected": "#8c564b",
                  "skipped": "#7f7f7f", "recommended": "#17becf", "failing-over": "#e377c2"}  # fmt: skip
CHART_HEIGHT = 170
RANGES_H = {1: "1 h", 6: "6 h", 24: "24 h", 24 * 7: "7 d", 24 * 30: "30 d"}  # the range choices (hours)

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("autoscaler.observe", "templates"),
    autoescape=jinja2.select_autoescape(default=True),
    undefined=jinja2.StrictUndefined,
)


@functools.cache
def vega_bundle() -> str:
    """vega, vega-lite and vega-embed in one script that sets ``window.vegaEmbed`` (about 0.9 MB; built once)."""
    import vl_convert

    return vl_convert.javascript_bundle()


@dataclass(frozen=True)
class Links:
    """Where a page links to; each is a path of the api-server."""

    bundle: str  # the vega bundle script
    epoch_prefix: str  # + an epoch number: that epoch's page of this job
    fleet: str

    def epoch(self, epoch: int) -> str:
        return f"{self.epoch_prefix}{epoch}"


def _scale(colors: dict[str, str]) -> alt.Scale:
    return alt.Scale(domain=list(colors), range=list(colors.values()))


def _data(name: str) -> alt.Chart:
    # The rows go into the spec's top-level "datasets" after altair has built it: altair validates a
    # spec against the Vega-Lite schema, inline rows included, which took 12 s for 720 points a series.
    return alt.Chart(alt.Data(name=name))


def _spec(chart: alt.LayerChart, title: str, height: int, datasets: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    spec = chart.properties(width="container", height=height, title=title).to_dict()
    spec["datasets"] = datasets
    return spec


def _shading() -> alt.Chart:
    return (
        _data("shading")
        .mark_rect(opacity=0.2)
        .encode(
            x=alt.X("start:T", title=None),
            x2="end:T",
            color=alt.Color("state:N", scale=_scale(SHADE_COLORS), title="epochs"),
            tooltip=[alt.Tooltip("state:N"), alt.Tooltip("start:T", format="%Y-%m-%d %H:%M"), alt.Tooltip("end:T")],
        )
    )


def load_chart(series: JobSeries) -> dict[str, Any]:
    rows = [{"time": p["time"], "series": name, "value": p[key]} for p in series.load
            for name, key in (("arrival rate", "arrival"), ("throughput", "throughput")) if p[key] is not None]  # fmt: skip
    line = (
        _data("load")
        .mark_line(point=series.step == 1)
        .encode(
            x=alt.X("time:T", title=None),
            y=alt.Y("value:Q", title="records/s"),
            color=alt.Color("series:N", title="sources"),
            tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M"), "series:N", alt.Tooltip("value:Q", format=",.0f")],
        )
    )
    layered = alt.layer(_shading(), line).resolve_scale(color="independent")
    return _spec(layered, "Arrival rate and throughput (sources)", CHART_HEIGHT, {"shading": series.shading, "load": rows})


def backlog_chart(series: JobSeries) -> dict[str, Any]:
    rows = [{"time": p["time"], "backlog": p["backlog"]} for p in series.load if p["backlog"] is not None]
    area = (
        _data("backlog")
        .mark_area(line=True, opacity=0.5, interpolate="step-after")
        .encode(
            x=alt.X("time:T", title=None),
            y=alt.Y("backlog:Q", title="records"),
            tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M"), alt.Tooltip("backlog:Q", format=",.0f")],
        )
    )
    layered = alt.layer(_shading(), area).resolve_scale(color="independent")
    return _spec(layered, "Backlog (records the sources owe)", CHART_HEIGHT, {"shading": series.shading, "backlog": rows})


def parallelism_chart(series: JobSeries, links: Links) -> dict[str, Any]:
    rows = [{"time": p["time"], "epoch": p["epoch"], "operator": p["operator"], "what": what, "value": p[what]}
            for p in series.parallelism for what in ("parallelism", "recommended") if p[what] is not None]  # fmt: skip
    href = f"{json.dumps(links.epoch_prefix)} + datum.epoch"  # a link per point, made in the browser
    base = _data("parallelism").encode(x=alt.X("time:T", title=None), y=alt.Y("value:Q", title="instances"))
    lines = base.mark_line(interpolate="step-after").encode(
        color=alt.Color("operator:N", title="operator"),
        strokeDash=alt.StrokeDash("what:N", title=None, sort=["parallelism", "recommended"]),
    )
    points = (
        base.mark_point(filled=True, size=30)
        .transform_calculate(href=href)
        .encode(
            color=alt.Color("operator:N", legend=None),
            href="href:N",
            tooltip=["operator:N", "what:N", "value:Q", "epoch:Q", alt.Tooltip("time:T", format="%Y-%m-%d %H:%M")],
        )
    )
    events = [e | {"change": _change(e)} for e in series.events]
    rules = (
        _data("actions")
        .mark_rule(strokeWidth=2)
        .transform_calculate(href=href)
        .encode(
            x="time:T",
            color=alt.Color("outcome:N", scale=_scale(OUTCOME_COLORS), title="actions"),
            href="href:N",
            tooltip=["outcome:N", "epoch:Q", "change:N", "downtime_s:Q", "approved_by:N", "message:N"],
        )
    )
    layered = alt.layer(_shading(), lines, points, rules).resolve_scale(color="independent")
    datasets = {"shading": series.shading, "parallelism": rows, "actions": events}
    return _spec(layered, "Parallelism: measured and recommended", CHART_HEIGHT + 40, datasets)


def _change(event: dict[str, Any]) -> str:
    old, new = event["old_parallelism"], event["new_parallelism"]
    return ", ".join(f"{op} {old.get(op, '?')} -> {n}" for op, n in new.items())


def job_page(series: JobSeries, *, title: str, subtitle: str, links: Links, hours: float | None,
             recent: Sequence[EpochView], tuning: TuningView | None = None) -> str:  # fmt: skip
    """The job view: the charts over the range, the actions, tuning, and the newest epochs with their reasons."""
    charts = {"load": load_chart(series), "backlog": backlog_chart(series), "parallelism": parallelism_chart(series, links)}
    events = [e | {"href": links.epoch(e["epoch"]), "change": _change(e)} for e in reversed(series.events)]
    return _ENV.get_template("job.html").render(
        title=title, subtitle=subtitle, series=series, links=links, hours=hours, ranges=RANGES_H, charts=charts,
        charts_json=_script_json(charts), events=events, recent=list(reversed(recent)), shade_colors=SHADE_COLORS,
        tuning=tuning,
    )  # fmt: skip


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: a message or a name holding "</script>" cannot end it."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def epoch_page(view: EpochView, *, title: str, links: Links, job_href: str, run_href: str | None,
               docs_href: str | None) -> str:  # fmt: skip
    return _ENV.get_template("epoch.html").render(
        title=title, e=view, links=links, job_href=job_href, run_href=run_href, docs_href=docs_href
    )


FLEET_COLUMNS = {  # sort key -> (heading, value for sorting)
    "job": ("job", lambda r: r["row"].job),
    "gap": ("gap", lambda r: r["row"].gap),
    "age": ("last decision", lambda r: _inf(r["row"].last_decision_age_s)),
    "rescale": ("last rescale", lambda r: r["row"].last_rescale.timestamp() if r["row"].last_rescale else 0.0),
    "lost": ("lost (1 day)", lambda r: r["row"].lost_last_day),
    "quarantined": ("quarantined (1 day)", lambda r: r["row"].quarantined_last_day),
    "failures": ("failures (1 day)", lambda r: r["row"].failures_last_day),
    "alerts": ("alerts (1 day)", lambda r: len(r["alerts"])),
    "lag": ("decision lag", lambda r: _inf(r["row"].decision_lag_s)),
}


def _inf(value: float | None) -> float:
    return float("inf") if value is None else value


def fleet_page(rows: Sequence[FleetRow], *, hrefs: dict[str, str], alerts: dict[str, list[dict[str, Any]]],
               sort: str, descending: bool, links: Links, now: datetime) -> str:  # fmt: skip
    """Every job on one page, sorted by ``sort`` (a key of FLEET_COLUMNS); each row links to its job view."""
    if sort not in FLEET_COLUMNS:
        raise ValueError(f"cannot sort by {sort!r}: one of {', '.join(FLEET_COLUMNS)}")
    items = [{"row": r, "href": hrefs.get(r.job), "alerts": alerts.get(r.job, [])} for r in rows]
    items.sort(key=FLEET_COLUMNS[sort][1], reverse=descending)
    return _ENV.get_template("fleet.html").render(
        items=items, columns=FLEET_COLUMNS, sort=sort, descending=descending, links=links, now=now
    )
