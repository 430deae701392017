"""Running the suites with GX 1.x in memory: one ephemeral context per docs folder, reused.

Importing GX costs ~2.5 s and building a context a few ms, so a process keeps one context per
Data Docs folder (``_CONTEXTS``) and rebuilds only the per-job objects (suites, validation
definitions, checkpoints) on every run -- they depend on the job's topology and thresholds.

Why not a purely in-memory context when Data Docs are wanted: GX rebuilds the site index from
the validation results it knows and deletes pages it does not. An in-memory results store would
make every new process wipe the pages of earlier epochs, so the results (GX's JSON) are kept on
disk next to the site, in ``<docs>/.gx-results/``; suites, definitions and checkpoints stay in memory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import great_expectations as gx
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.types.base import DataContextConfig, InMemoryStoreBackendDefaults, ProgressBarsConfig

import autoscaler.validate.expectations  # noqa: F401  (registers the custom expectation)

SITE = "ds2-validation"
RESULTS_FOLDER = ".gx-results"
INDEX_LIMIT = 500  # validation runs listed on the Data Docs index page (older pages stay on disk)
_CONTEXTS: dict[str, Any] = {}
_LOCK = threading.Lock()
_DEFERRED: dict[str, list[Any]] = {}  # docs folder -> results whose pages one_docs_build() builds at its end


@dataclass(frozen=True)
class SuiteRun:
    """One suite's GX result and its Data Docs page (a file path), if docs are written."""

    result: Any  # ExpectationSuiteValidationResult
    docs_page: str | None


def context(docs_dir: Path | None) -> Any:
    """The process's ephemeral context for ``docs_dir`` (None: no Data Docs)."""
    key = str(docs_dir.resolve()) if docs_dir else ""
    with _LOCK:
        if key not in _CONTEXTS:
            _CONTEXTS[key] = _new_context(docs_dir)
        return _CONTEXTS[key]


def _new_context(docs_dir: Path | None) -> Any:
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,  # no usage statistics sent from a scheduler's worker
        progress_bars=ProgressBarsConfig(globally=False),  # task logs, not terminals
    )
    if docs_dir is not None:
        docs_dir.mkdir(parents=True, exist_ok=True)
        config.stores[config.validation_results_store_name] = {
            "class_name": "ValidationResultsStore",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir / RESULTS_FOLDER)},
        }
        config.data_docs_sites = {
            SITE: {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder", "validation_results_limit": INDEX_LIMIT},
            }
        }
    return gx.get_context(mode="ephemeral", project_config=config)


def _datasource(ctx: Any, engine: str) -> Any:
    name = f"ds2-{engine}"
    try:
        return ctx.data_sources.get(name)
    except (KeyError, ValueError, LookupError):
        pass
    source = ctx.data_sources.add_pandas(name) if engine == "pandas" else ctx.data_sources.add_spark(name, persist=True)
    for asset in ("metrics", "slots"):
        source.add_dataframe_asset(asset).add_batch_definition_whole_dataframe("batch")
    return source


def _replace(collection: Any, name: str, obj: Any) -> Any:
    try:
        collection.delete(name)
    except Exception:  # absent: nothing to replace (GX raises different errors per collection)
        pass
    return collection.add(obj)


def run_suite(
    suite: gx.ExpectationSuite,
    asset: str,
    batch: Any,
    engine: str,
    index_columns: list[str],
    run_name: str,
    docs_dir: Path | None,
) -> SuiteRun:
    """Validate ``batch`` (a pandas or Spark DataFrame) against ``suite`` with a checkpoint."""
    ctx = context(docs_dir)
    with _LOCK:
        source = _datasource(ctx, engine)
        definition = source.get_asset(asset).get_batch_definition("batch")
        suite = _replace(ctx.suites, suite.name, suite)
        vd_name = f"{suite.name}.{engine}"
        validation = _replace(
            ctx.validation_definitions, vd_name, gx.ValidationDefinition(name=vd_name, data=definition, suite=suite)
        )
        deferred = _DEFERRED.get(str(docs_dir.resolve())) if docs_dir else None
        actions = [gx.checkpoint.UpdateDataDocsAction(name="docs", site_names=[SITE])] if docs_dir and deferred is None else []
        checkpoint = _replace(
            ctx.checkpoints,
            vd_name,
            gx.Checkpoint(
                name=vd_name,
                validation_definitions=[validation],
                actions=actions,
                result_format={"result_format": "COMPLETE", "unexpected_index_column_names": index_columns},
            ),
        )
    outcome = checkpoint.run(batch_parameters={"dataframe": batch}, run_id=RunIdentifier(run_name=run_name))
    (identifier, result), *_ = outcome.run_results.items()
    page = None
    if docs_dir is not None:
        if deferred is not None:
            with _LOCK:
                deferred.append(identifier)
        urls = ctx.get_docs_sites_urls(resource_identifier=identifier, site_name=SITE, only_if_exists=deferred is None)
        page = urls[0]["site_url"].removeprefix("file://") if urls else None
    return SuiteRun(result=result, docs_page=page)


@contextmanager
def one_docs_build(docs_dir: Path | None) -> Iterator[None]:
    """Validate many epochs or jobs, then build their Data Docs pages and the index once, at the end.

    Each checkpoint's own docs action rebuilds the site index: for a fleet's interval that was a third
    of the validation's time. Within this block the checkpoints skip it; the pages are named as they will
    be, and built (all of them, one index) when the block ends, also when it ends with an error.
    """
    if docs_dir is None:
        yield
        return
    key = str(docs_dir.resolve())
    with _LOCK:
        _DEFERRED[key] = []
    try:
        yield
    finally:
        with _LOCK:
            identifiers = _DEFERRED.pop(key, [])
        if identifiers:
            context(docs_dir).build_data_docs(site_names=[SITE], resource_identifiers=identifiers, build_index=True)


def docs_index(docs_dir: Path) -> Path:
    return docs_dir / "index.html"
