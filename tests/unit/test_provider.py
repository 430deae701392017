"""The provider package: its metadata against Airflow's schema, its settings, and the wheel's contents.

The wheel installed into a fresh environment with stock Airflow is tests/integration/test_install.py
(``make test-install``)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import jsonschema
import pytest
import yaml

from autoscaler.config import paths
from autoscaler.config.jobs import load_jobs
from autoscaler.errors import InputError
from ds2_airflow.provider import get_provider_info
from ds2_airflow.provider_config import SECTION, export_to_environment
from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_provider_info_matches_airflows_schema_and_names_what_exists():
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    modules = [m for key in ("hooks", "operators", "triggers") for entry in info[key] for m in entry["python-modules"]]
    for module in modules:
        importlib.import_module(module)
    classes = [c["hook-class-name"] for c in info["connection-types"]] + [p["plugin-class"] for p in info["plugins"]]
    for path in classes:
        module, _, name = path.rpartition(".")
        assert hasattr(importlib.import_module(module), name), path
    # Every plugin is registered through the entry point as well, under the plugin's own name.
    entry_points = PYPROJECT["project"]["entry-points"]["airflow.plugins"]
    registered = {value.replace(":", ".") for value in entry_points.values()}
    assert registered == {p["plugin-class"] for p in info["plugins"]}
    for plugin in info["plugins"]:
        module, _, name = plugin["plugin-class"].rpartition(".")
        assert getattr(importlib.import_module(module), name).name == plugin["name"]
    assert set(info["config"][SECTION]["options"]) == {s.key for s in paths.SETTINGS}


def test_every_provider_module_imports_without_reading_airflows_config():
    """Airflow imports the provider's metadata while airflow.configuration is still loading (seen: a
    circular import in a fresh install when the package read its settings at import)."""
    code = ("import sys; import ds2_airflow.provider; "
            "assert 'airflow.configuration' not in sys.modules, 'ds2_airflow.provider imported Airflow config'")  # fmt: skip
    subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", code], check=True, timeout=120)


def test_a_setting_from_airflows_config_reaches_the_core_and_the_environment_wins(monkeypatch, tmp_path):
    for setting in paths.SETTINGS:
        monkeypatch.setenv(setting.env, "")  # empty is unset; and monkeypatch restores what export_to_environment sets
    monkeypatch.setenv("AIRFLOW__DS2_AUTOSCALER__DATA_DIR", str(tmp_path / "shared"))
    monkeypatch.setenv("AIRFLOW__DS2_AUTOSCALER__JOBS_FILE", str(tmp_path / "jobs.yaml"))
    monkeypatch.setenv(paths.JARS_DIR.env, str(tmp_path / "mine"))  # already set: kept
    monkeypatch.setenv("AIRFLOW__DS2_AUTOSCALER__JARS_DIR", str(tmp_path / "other"))
    exported = export_to_environment()
    assert exported == {"DS2_DATA_DIR": str(tmp_path / "shared"), "DS2_JOBS_CONFIG": str(tmp_path / "jobs.yaml")}
    assert paths.data_dir() == tmp_path / "shared" and paths.jobs_file() == tmp_path / "jobs.yaml"
    assert paths.jar("ds2-testjob.jar") == tmp_path / "mine" / "ds2-testjob.jar"


def test_a_store_on_an_object_store_takes_its_credentials_and_lease_from_connections(monkeypatch):
    """The key, secret and endpoint of the ``aws`` connection, and the ``postgres`` lease connection as a libpq URI,
    reach the environment the core and its subprocesses read; what was exported is named, never shown."""
    for setting in paths.SETTINGS:
        monkeypatch.setenv(setting.env, "")
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ALLOW_HTTP",
                "DS2_LEASE_DSN"):  # fmt: skip
        monkeypatch.setenv(key, "")  # recorded, so that monkeypatch removes what the export sets
        monkeypatch.delenv(key)
    monkeypatch.setenv("AIRFLOW__DS2_AUTOSCALER__STORE", "s3://ds2-bucket/store")
    monkeypatch.setenv("AIRFLOW__DS2_AUTOSCALER__STORE_CONN_ID", "ds2_store")
    monkeypatch.setenv("AIRFLOW__DS2_AUTOSCALER__LEASE_CONN_ID", "ds2_lease")
    extra = {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"}
    store = {"conn_type": "aws", "login": "AKEY", "password": "s3cr/t", "extra": extra}
    lease = {"conn_type": "postgres", "login": "lease", "password": "p@ss:word", "host": "db", "port": 5433, "schema": "ds2"}
    monkeypatch.setenv("AIRFLOW_CONN_DS2_STORE", json.dumps(store))
    monkeypatch.setenv("AIRFLOW_CONN_DS2_LEASE", json.dumps(lease))
    exported = export_to_environment()
    assert exported["AWS_SECRET_ACCESS_KEY"] == "(from a connection)" and "s3cr/t" not in json.dumps(exported)
    assert paths.store() == "s3://ds2-bucket/store"
    assert (os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]) == ("AKEY", "s3cr/t")
    endpoint = (os.environ["AWS_ENDPOINT_URL"], os.environ["AWS_REGION"], os.environ["AWS_ALLOW_HTTP"])
    assert endpoint == ("http://127.0.0.1:9", "eu-west-1", "true")
    assert os.environ["DS2_LEASE_DSN"] == "postgresql://lease:p%40ss%3Aword@db:5433/ds2"
    monkeypatch.setenv("AIRFLOW_CONN_DS2_LEASE", json.dumps({**lease, "conn_type": "mysql"}))
    monkeypatch.delenv("DS2_LEASE_DSN")
    with pytest.raises(InputError, match="the lease needs PostgreSQL"):
        export_to_environment()


def test_without_a_checkout_the_defaults_come_from_the_install(monkeypatch, tmp_path):
    for setting in paths.SETTINGS:
        monkeypatch.delenv(setting.env, raising=False)
    monkeypatch.setattr(paths, "_REPO", tmp_path / "site-packages")  # no pyproject.toml there
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    assert paths.checkout() is None
    assert paths.data_dir() == tmp_path / "airflow" / "ds2-data"
    assert paths.spark_conf_dir() is None
    assert paths.jar("ds2-testjob.jar") == paths.PACKAGE_DIR / "jars" / "ds2-testjob.jar"
    with pytest.raises(InputError) as err:
        paths.jobs_file()
    assert "[ds2_autoscaler] jobs_file" in str(err.value) and "AIRFLOW__DS2_AUTOSCALER__JOBS_FILE" in str(err.value)


def test_relative_paths_in_a_jobs_file_outside_the_checkout_are_relative_to_its_folder(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    config = folder / "jobs.yaml"
    entry = {"name": "orders", "flink_job_name": "orders", "jar": "jars/orders.jar", "savepoint_dir": "savepoints"}
    config.write_text(yaml.safe_dump({"version": 1, "jobs": [entry]}))
    (job,) = load_jobs(config)
    assert job.deployment.jar_path == folder / "jars" / "orders.jar"
    assert job.deployment.savepoint_dir == str(folder / "savepoints")
    # In the checkout they stay relative to its root (include/jobs.yaml says build/ds2-testjob.jar).
    assert paths.base_dir(ROOT / "include" / "jobs.yaml") == ROOT


def test_the_spark_job_is_found_as_a_package_file():
    app = paths.spark_application()
    assert app == ROOT / "spark_jobs" / "ds2_policy.py"
    # Run as a script, its folder comes first on sys.path: it must hold no module that shadows another.
    assert sorted(p.name for p in app.parent.glob("*.py")) == ["__init__.py", "ds2_policy.py"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    res = subprocess.run([str(ROOT / "scripts" / "build-wheel.sh"), str(out)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return Path(res.stdout.strip().splitlines()[-1])


def test_the_wheel_ships_the_package_data_and_declares_its_dependencies(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(info).decode())
        entry_points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
    for name in ("autoscaler/observe/templates/job.html", "autoscaler/jars/ds2-testjob.jar", "autoscaler/jars/ds2-sql-runner.jar",
                 "spark_jobs/ds2_policy.py", "ds2_airflow/provider.py", "autoscaler/config/paths.py"):  # fmt: skip
        assert name in names, name
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/")) or "__pycache__" in n]
    requires = metadata.get_all("Requires-Dist")
    runtime = [r for r in requires if "extra ==" not in r]
    assert any(r.startswith("apache-airflow<3.4,>=3.3.2") for r in runtime), runtime
    assert not [
        r for r in runtime if r.split("<")[0].split(">")[0].split("=")[0] in ("ruff", "pytest", "playwright", "hypothesis")
    ]
    assert any(r.startswith("pytest==") and 'extra == "dev"' in r for r in requires)
    assert metadata["Requires-Python"] in (">=3.11,<3.15", "<3.15,>=3.11")
    assert "[airflow.plugins]" in entry_points and "ds2_airflow.provider:get_provider_info" in entry_points


def test_the_runtime_ranges_hold_the_pinned_versions():
    """requirements.txt (the constraints of the project's own runs) must satisfy the declared ranges."""
    from packaging.requirements import Requirement

    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    project = PYPROJECT["project"]
    declared = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    for text in declared:
        requirement = Requirement(text)
        pinned = pins.get(requirement.name.lower().replace("_", "-"))
        assert pinned is not None, f"{requirement.name} is declared but not pinned in requirements.txt"
        assert requirement.specifier.contains(pinned, prereleases=True), f"{text} excludes the pinned {pinned}"


def test_the_checkout_registers_each_plugin_once(tmp_path):
    """In the checkout the plugins come from the editable install's entry points; the plugins folder skips the
    package (plugins/.airflowignore) and no second copy of the metadata sits in the repository: else Airflow
    reports every plugin as "already registered"."""
    code = ("import json; from airflow import plugins_manager as pm; plugins, errors = pm._get_plugins(); "
            "print(json.dumps([sorted(p.name for p in plugins if p.name.startswith('ds2_')), errors]))")  # fmt: skip
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "false", "PYTHONPATH": str(ROOT)}  # fmt: skip
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout  # fmt: skip
    names, errors = json.loads(out.strip().splitlines()[-1])
    assert names == ["ds2_timetables", "ds2_validation_docs", "ds2_views"] and errors == {}, errors
