"""docker-compose.yaml checked against the project, statically (no Docker engine runs here).

Services, mounts and build files, image versions against requirements.txt and scripts/flink.sh, the
variables of .env.example, published ports, the Flink and Spark settings the autoscaler relies on.
These checks are all the verification the compose deployment gets on the development machines
(docs/deploy.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yaml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "deploy" / "airflow.Dockerfile"
DOCKERIGNORE = ROOT / "deploy" / "airflow.Dockerfile.dockerignore"

AIRFLOW_SERVICES = ("airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
                    "airflow-worker-1", "airflow-worker-2")  # fmt: skip
AIRFLOW_WORKERS = ("airflow-worker-1", "airflow-worker-2")
SPARK_WORKERS = ("spark-worker-1", "spark-worker-2")
TASKMANAGERS = ("flink-taskmanager-1", "flink-taskmanager-2")
SERVICES = ("postgres", "redis", *AIRFLOW_SERVICES, "spark-master", *SPARK_WORKERS, "spark-connect", "flink-jobmanager",
            *TASKMANAGERS, "kafka-jars", "kafka")  # fmt: skip
CELERY_ENV = ROOT / "conf" / "airflow" / "celery.env"
DATA_DIR = "/opt/ds2/data"
PLACEHOLDER = "change-me"
SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|_KEY\b")

# ${VAR}, ${VAR:-default}, ${VAR:?message}, ... ; $$ is compose's escape for a literal $.
VAR_REF = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-?+][^}]*)?\}")
BARE_REF = re.compile(r"(?<!\$)\$([A-Za-z_][A-Za-z0-9_]*)")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    out: dict[str, str] = {}
    for number, line in enumerate(ENV_EXAMPLE.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name), f".env.example:{number}: not NAME=value: {line!r}"
        assert name not in out, f".env.example:{number}: {name} listed twice"
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[name] = value
    return out


def pins() -> dict[str, str]:
    out = {}
    for path in (ROOT / "requirements.txt",):
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                name, sep, version = line.partition("==")
                assert sep, f"{path.name}: not an exact pin: {line!r}"
                out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def interpolate(value: str, env: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        name, op = match.group(1), match.group(2) or ""
        if env.get(name):
            return env[name]
        return op[2:] if op.startswith(":-") else ""

    return VAR_REF.sub(one, value).replace("$$", "$")


def mounts(service: dict) -> list[tuple[str, str]]:
    """(source, target) of every volume entry, short or long syntax."""
    out = []
    for entry in service.get("volumes", []):
        if isinstance(entry, dict):
            out.append((entry["source"], entry["target"]))
        else:
            source, target, *_ = entry.split(":")
            out.append((source, target))
    return out


def is_bind(source: str) -> bool:
    return source.startswith((".", "/", "~"))


def mount_of(service: dict, path: str) -> tuple[str, str] | None:
    """The mount a container path lies in (the deepest one)."""
    found = [(s, t) for s, t in mounts(service) if path == t or path.startswith(t.rstrip("/") + "/")]
    return max(found, key=lambda m: len(m[1]), default=None)


def flink_properties(service: dict) -> dict[str, str]:
    text = service["environment"]["FLINK_PROPERTIES"]
    props = {}
    for line in text.splitlines():
        if line.strip():
            # the image's entrypoint strips all blanks and splits at the first colon: no comments possible
            assert "#" not in line, f"FLINK_PROPERTIES cannot hold comments: {line!r}"
            key, _, value = line.partition(":")
            props[key.strip()] = value.strip()
    return props


def image_of(service: dict) -> tuple[str, str]:
    name, sep, tag = service["image"].rpartition(":")
    assert sep and "/" not in tag, f"image {service['image']!r} has no tag"
    return name, tag


def test_every_service_is_there(services):
    assert set(SERVICES) <= set(services), f"missing: {sorted(set(SERVICES) - set(services))}"


def test_dependencies_exist_are_acyclic_and_healthchecked(services):
    graph = {}
    for name, service in services.items():
        deps = service.get("depends_on") or {}
        deps = {dep: {"condition": "service_started"} for dep in deps} if isinstance(deps, list) else deps
        for dep, spec in deps.items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            condition = spec.get("condition", "service_started")
            assert condition in ("service_started", "service_healthy", "service_completed_successfully"), condition
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy, which has no healthcheck"
        graph[name] = set(deps)
    done: set[str] = set()
    while graph.keys() - done:
        ready = {n for n in graph.keys() - done if graph[n] <= done}
        assert ready, f"dependency cycle among {sorted(graph.keys() - done)}"
        done |= ready


def test_bind_mounts_build_files_and_scripts_exist(compose, services):
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for source, _ in mounts(service):
            if is_bind(source):
                assert (ROOT / source).exists(), f"{name}: bind mount of missing {source}"
            else:
                assert source in declared, f"{name}: volume {source} is not declared under volumes:"
        if "build" in service:
            context = ROOT / service["build"]["context"]
            assert context.is_dir(), f"{name}: build context {context} missing"
            assert (context / service["build"]["dockerfile"]).is_file(), f"{name}: Dockerfile missing"
    for script in re.findall(r"/opt/ds2/deploy/([\w.-]+)", COMPOSE.read_text()):
        assert (ROOT / "deploy" / script).is_file(), f"docker-compose.yaml runs deploy/{script}, which does not exist"


def test_images_are_pinned(services):
    for name, service in services.items():
        assert "image" in service, f"{name} has no image"
        _, tag = image_of(service)
        assert tag != "latest" and re.match(r"\d+\.\d+", tag), f"{name}: image tag {tag!r} is not a pinned version"


def test_airflow_image_matches_requirements(services):
    airflow = pins()["apache-airflow"]
    base = re.search(r"^FROM\s+apache/airflow:(\d+\.\d+\.\d+)-python(\d+\.\d+)\s*$", DOCKERFILE.read_text(), re.M)
    assert base, "deploy/airflow.Dockerfile does not start from apache/airflow:<version>-python<x.y>"
    assert base.group(1) == airflow, f"Dockerfile's Airflow {base.group(1)} != requirements.txt's {airflow}"
    assert base.group(2) == "3.11"
    assert '">=3.11' in (ROOT / "pyproject.toml").read_text()
    for name in AIRFLOW_SERVICES:
        service = services[name]
        assert service["build"] == {"context": ".", "dockerfile": "deploy/airflow.Dockerfile"}, name
        assert image_of(service)[1] == f"{airflow}-python3.11", name


def test_spark_image_matches_pyspark(services):
    versions = pins()
    assert versions["pyspark"] == versions["pyspark-client"], "pyspark and pyspark-client must be pinned alike"
    for name in ("spark-master", *SPARK_WORKERS):
        image, tag = image_of(services[name])
        assert image == "apache/spark", name
        assert tag.split("-")[0] == versions["pyspark"], f"{name}: Spark {tag} != pyspark {versions['pyspark']}"
        assert "java17" in tag, f"{name}: Java 17 like the driver (openjdk-17 in the Airflow image)"


def test_flink_image_matches_local_flink(services):
    flink_sh = re.search(r"^FLINK_VERSION=(\S+)$", (ROOT / "scripts" / "flink.sh").read_text(), re.M)
    assert flink_sh
    for name in ("flink-jobmanager", *TASKMANAGERS):
        image, tag = image_of(services[name])
        assert image == "flink" and tag == f"{flink_sh.group(1)}-java17", f"{name}: {image}:{tag}"
        assert tag.startswith("2.3."), tag


def test_postgres_is_16_with_a_healthcheck_and_a_volume(services):
    service = services["postgres"]
    image, tag = image_of(service)
    assert image == "postgres" and re.match(r"16\.\d+", tag), tag
    assert "pg_isready" in str(service["healthcheck"]["test"])
    assert mount_of(service, "/var/lib/postgresql/data")[0] == "postgres-db"


def test_variables_match_env_example(env_example):
    text = COMPOSE.read_text()
    used = {m.group(1) for m in VAR_REF.finditer(text)}
    assert not BARE_REF.findall(text), "use ${VAR} (or $$ for a literal $) in docker-compose.yaml"
    assert used - env_example.keys() == set(), f"used but not in .env.example: {sorted(used - env_example.keys())}"
    assert env_example.keys() - used == set(), f"in .env.example but unused: {sorted(env_example.keys() - used)}"


def test_secrets_are_required_and_only_placeholders(env_example):
    text = COMPOSE.read_text()
    for match in VAR_REF.finditer(text):
        if SECRET_NAME.search(match.group(1)):
            assert (match.group(2) or "").startswith(":?"), f"${{{match.group(1)}}} must fail when unset: ${{VAR:?message}}"
    secrets = [name for name in env_example if SECRET_NAME.search(name)]
    assert len(secrets) >= 5
    for name in secrets:
        assert env_example[name] == PLACEHOLDER, f".env.example: {name} must be the placeholder {PLACEHOLDER!r}"
    for name, value in env_example.items():
        assert not re.search(r"[A-Za-z0-9+/_=-]{32,}", value), f".env.example: {name} looks like a real secret"
        if name.startswith("AIRFLOW_CONN_"):
            fields = json.loads(value)
            extra = fields.get("extra") or {}
            assert not {"login", "password"} & fields.keys() and "token" not in extra, f"{name}: credentials in the example"


def test_connections_point_at_the_compose_clusters(env_example, services):
    flink = json.loads(env_example["AIRFLOW_CONN_FLINK_DEFAULT"])
    assert {k: flink[k] for k in ("conn_type", "host", "port", "schema")} == {
        "conn_type": "flink", "host": "flink-jobmanager", "port": 8081, "schema": "https"}  # fmt: skip
    assert flink["host"] in services and "127.0.0.1:8081:8081" in services["flink-jobmanager"]["ports"]
    spark = json.loads(env_example["AIRFLOW_CONN_SPARK_DS2"])
    assert spark == {"conn_type": "spark_connect", "host": "sc://spark-connect", "port": 15002}
    connect = services["spark-connect"]["command"]
    assert f"spark.connect.grpc.binding.port={spark['port']}" in connect and "spark://spark-master:7077" in connect
    master = services["spark-master"]["command"]
    assert master[master.index("--host") + 1] == "spark-master" and master[master.index("--port") + 1] == "7077"
    for name in SPARK_WORKERS:
        assert "spark://spark-master:7077" in services[name]["command"]
    for name in AIRFLOW_SERVICES:
        env = services[name]["environment"]
        for var in ("AIRFLOW_CONN_FLINK_DEFAULT", "AIRFLOW_CONN_SPARK_DS2"):
            assert env[var].startswith(f"${{{var}:?"), f"{name}: {var}"


def test_airflow_services_share_the_project_setup(services, env_example):
    commands = {"airflow-apiserver": "api-server", "airflow-scheduler": "scheduler",
                "airflow-dag-processor": "dag-processor", "airflow-triggerer": "triggerer",
                **{key: ["celery", "worker"] for key in AIRFLOW_WORKERS}}  # fmt: skip
    first = services[AIRFLOW_SERVICES[0]]
    for name in AIRFLOW_SERVICES:
        service = services[name]
        assert mounts(service) == mounts(first) and service["user"] == first["user"], f"{name}: not from x-airflow-common"
        if name in commands:
            assert service["command"] == commands[name]
        assert service["env_file"] == ["./conf/airflow/celery.env"], f"{name}: not the shared Celery settings"
        env = {key: interpolate(str(value), env_example) for key, value in service["environment"].items()}
        assert "AIRFLOW__CORE__EXECUTOR" not in env, f"{name}: the executor comes from conf/airflow/celery.env"
        assert re.fullmatch(r"redis://:[^@/]+@redis:6379/0", env["AIRFLOW__CELERY__BROKER_URL"]), name
        assert re.fullmatch(r"db\+postgresql://[^:@/]+:[^@/]+@postgres:5432/\w+", env["AIRFLOW__CELERY__RESULT_BACKEND"]), name
        assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "false"
        sql = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        assert re.fullmatch(r"postgresql\+psycopg2://[^:@/]+:[^@/]+@postgres:5432/\w+", sql), f"{name}: {sql}"
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
        for folder in ("dags", "plugins"):
            target = env[f"AIRFLOW__CORE__{folder.upper()}_FOLDER"]
            assert (f"./{folder}", target) in mounts(service), f"{name}: {folder} folder {target} is not ./{folder}"
        for folder in ("include", "spark_jobs", "bin", "conf"):
            assert (f"./{folder}", f"/opt/ds2/{folder}") in mounts(service), f"{name}: ./{folder} not mounted"
        assert env["DS2_DATA_DIR"] == DATA_DIR and mount_of(service, DATA_DIR) == ("ds2-data", DATA_DIR), name
        assert mount_of(service, env["DS2_JOBS_CONFIG"]) == ("./include", "/opt/ds2/include"), name
        assert mount_of(service, env["SPARK_CONF_DIR"])[0] == "./conf"
    init = (ROOT / "deploy" / "init-airflow.sh").read_text()
    assert services["airflow-init"]["command"] == ["bash", "/opt/ds2/deploy/init-airflow.sh"]
    assert 0 <= init.index("airflow db migrate") < init.index("python -m ds2_airflow.bootstrap")
    for name in AIRFLOW_SERVICES[1:]:
        assert services[name]["depends_on"]["airflow-init"] == {"condition": "service_completed_successfully"}


def test_dockerfile_installs_the_project():
    text = DOCKERFILE.read_text()
    assert re.search(r"^COPY .*\brequirements\.txt pyproject\.toml /opt/ds2/$", text, re.M)
    # The runtime dependencies at requirements.txt's pins, with the extras the compose services use; never dev.
    assert "\nRUN cd /opt/ds2 && python deploy/install-deps.py celery postgres s3\n" in text
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"celery", "postgres", "dev"} <= set(extras)
    assert "openjdk-17-jre-headless" in text
    assert re.search(r"pip install --no-cache-dir --no-deps -e /opt/ds2 && rm -rf /opt/ds2/ds2_autoscaler\.egg-info$", text, re.M)
    versions = pins()
    assert versions.get("psycopg2-binary") and versions.get("asyncpg"), "the PostgreSQL drivers must be pinned"
    ignore = DOCKERIGNORE.read_text().splitlines()
    assert "*" in ignore, f"{DOCKERIGNORE.name} must exclude everything by default (.venv, data/, build/ are large)"
    for source in re.findall(r"^COPY --chown=\S+ (.+) \S+$", text, re.M):
        for path in source.split():
            top = path.split("/")[0]
            assert (ROOT / path).exists(), f"Dockerfile copies missing {path}"
            assert f"!{top}" in ignore, f"{top} is kept out of the build context by {DOCKERIGNORE.name}"
    packages = re.search(r"where = \[(.*?)\]", (ROOT / "pyproject.toml").read_text())
    for package_root in re.findall(r'"([^"]+)"', packages.group(1)):
        if package_root != ".":  # "." holds the spark_jobs package, copied on its own
            assert f"COPY --chown=airflow:0 {package_root} /opt/ds2/{package_root}" in text
    assert "COPY --chown=airflow:0 spark_jobs /opt/ds2/spark_jobs" in text


def test_flink_reporter_debloat_and_shared_savepoints(services):
    airflow = services["airflow-worker-1"]
    for name in ("flink-jobmanager", *TASKMANAGERS):
        service = services[name]
        props = flink_properties(service)
        assert props["metrics.reporter.prom.factory.class"] == "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
        assert props["metrics.reporter.prom.port"] == "9249" and "9249" in service["expose"]
        assert props["jobmanager.rpc.address"] == "flink-jobmanager"
        assert props["taskmanager.network.memory.buffer-debloat.enabled"] == "true"
        for key in ("execution.checkpointing.dir", "execution.checkpointing.savepoint-dir", "web.upload.dir"):
            path = props[key].removeprefix("file://")
            assert mount_of(service, path), f"{name}: {key} {path} is not on a volume"
        savepoints = props["execution.checkpointing.savepoint-dir"].removeprefix("file://")
        assert savepoints == f"{DATA_DIR}/savepoints"  # the jobs config's default: DS2_DATA_DIR/savepoints
        assert mount_of(service, savepoints) == mount_of(airflow, savepoints) == ("ds2-data", DATA_DIR)


def test_spark_executors_share_the_store_with_the_driver(services):
    for name in SPARK_WORKERS:
        worker = services[name]
        assert mount_of(worker, DATA_DIR) == ("ds2-data", DATA_DIR)
        assert worker["hostname"] == worker["environment"]["SPARK_LOCAL_HOSTNAME"] == name
        for driver in AIRFLOW_WORKERS:  # the Celery workers run the tasks, so the spark-submit driver
            assert worker["user"] == services[driver]["user"], "executors write files the driver renames: same uid"
    for driver in AIRFLOW_WORKERS:
        assert services[driver]["hostname"] == services[driver]["environment"]["SPARK_LOCAL_HOSTNAME"] == driver


def test_published_ports_bind_loopback(services):
    published = []
    for name, service in services.items():
        for port in service.get("ports", []):
            if isinstance(port, dict):
                host_ip = port.get("host_ip")
            else:
                parts = str(port).split(":")
                host_ip = parts[0] if len(parts) == 3 else None
            assert host_ip == "127.0.0.1", f"{name}: port {port} is not bound to 127.0.0.1"
            published.append(name)
    assert {"airflow-apiserver", "flink-jobmanager", "spark-master"} <= set(published)


def test_spark_connect_is_started_as_scripts_spark_sh_starts_it(services):
    """The compose service and the local script run the same server class with the same properties file."""
    command = services["spark-connect"]["command"]
    server = "org.apache.spark.sql.connect.service.SparkConnectServer"
    assert command[command.index("--class") + 1] == server
    assert command[command.index("--properties-file") + 1] == "/opt/ds2/conf/spark/connect-server.conf"
    assert mount_of(services["spark-connect"], "/opt/ds2/conf") == ("./conf", "/opt/ds2/conf")
    script = (ROOT / "scripts" / "spark.sh").read_text()
    assert f"--class {server}" in script and '--properties-file "$CONNECT_CONF"' in script
    assert "CONNECT_CONF=$ROOT/conf/spark/connect-server.conf" in script
    assert (ROOT / "conf" / "spark" / "connect-server.conf").is_file()
    assert not services["spark-connect"].get("ports"), "Spark Connect has no authentication here: never published"
    assert mount_of(services["spark-connect"], DATA_DIR)[0] == "ds2-data"


TLS_IN_AIRFLOW = "/opt/ds2/tls"
TLS_IN_FLINK = "/flink-tls"


def test_flink_rest_takes_tls_with_client_certificates(services, env_example):
    """The compose Flink sets exactly the keys ``scripts/flink.sh --ssl`` sets (conf/flink/ssl.yaml, which
    tests/integration/test_flink_ssl.py runs a real Flink with), on material deploy/flink-tls.sh makes in
    the flink-tls volume; Airflow's connection presents the client certificate and checks the CA."""
    local = {}
    for line in (ROOT / "conf" / "flink" / "ssl.yaml").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition(":")
            local[key.strip()] = value.strip()
    password = "${FLINK_TLS_PASSWORD:?set FLINK_TLS_PASSWORD in .env (see .env.example)}"
    expected = {k: v.replace("@SSL_DIR@", TLS_IN_FLINK).replace("@SSL_PASSWORD@", password) for k, v in local.items()}
    assert expected["security.ssl.rest.authentication-enabled"] == "true"
    for name in ("flink-jobmanager", *TASKMANAGERS):
        props = flink_properties(services[name])
        assert {k: props.get(k) for k in expected} == expected, name
        assert f"flink-tls:{TLS_IN_FLINK}:ro" in services[name]["volumes"]
    for name in AIRFLOW_SERVICES:
        assert f"flink-tls:{TLS_IN_AIRFLOW}:ro" in services[name]["volumes"], name
    init = services["ds2-volumes-init"]
    assert f"flink-tls:{TLS_IN_AIRFLOW}" in init["volumes"] and init["environment"]["FLINK_TLS_PASSWORD"] == password
    script = (ROOT / "deploy" / "init-volumes.sh").read_text()
    call = re.search(r'flink-tls\.sh" "\$tls" "([^"]+)"', script)
    assert call and "DNS:flink-jobmanager" in call.group(1).split(","), "the server certificate must name the host Airflow uses"
    assert f"tls={TLS_IN_AIRFLOW}" in script
    extra = json.loads(env_example["AIRFLOW_CONN_FLINK_DEFAULT"])["extra"]
    assert extra == {"verify": f"{TLS_IN_AIRFLOW}/ca.pem", "client_cert": f"{TLS_IN_AIRFLOW}/client.pem",
                     "client_key": f"{TLS_IN_AIRFLOW}/client.key"}  # fmt: skip
    dockerfile = DOCKERFILE.read_text()
    assert re.search(r"apt-get install [^\n]*\bopenssl\b", dockerfile), "the image that runs flink-tls.sh needs openssl"


def test_the_compose_connection_reaches_the_hook_as_tls_with_a_client_certificate(env_example, monkeypatch):
    from ds2_airflow.hooks.flink import FlinkHook

    monkeypatch.setenv("AIRFLOW_CONN_FLINK_DEFAULT", env_example["AIRFLOW_CONN_FLINK_DEFAULT"])
    conn = FlinkHook("flink_default").connection()
    assert conn.base_url == "https://flink-jobmanager:8081"
    assert (conn.verify, conn.client_cert, conn.client_key) == (
        f"{TLS_IN_AIRFLOW}/ca.pem", f"{TLS_IN_AIRFLOW}/client.pem", f"{TLS_IN_AIRFLOW}/client.key")  # fmt: skip


def _keytool() -> str:
    java = shutil.which("java")
    keytool = Path(os.path.realpath(java)).parent / "keytool" if java else None
    if keytool is None or not keytool.is_file():
        pytest.fail("no Java keytool on PATH: make setup installs a JDK")
    return str(keytool)


def test_flink_tls_script_makes_material_that_verifies(tmp_path):
    """deploy/flink-tls.sh: owner-only files, the server certificate names the SAN, the client certificate
    is signed by the CA, a second run changes nothing, and bad input gets one clear line."""
    script = ROOT / "deploy" / "flink-tls.sh"
    env = {**os.environ, "FLINK_TLS_PASSWORD": "a-long-enough-password", "KEYTOOL": _keytool()}
    out = tmp_path / "tls"
    san = "DNS:flink-jobmanager,DNS:localhost,IP:127.0.0.1"
    subprocess.run([str(script), str(out), san], env=env, check=True, capture_output=True, text=True)
    files = {"ca.pem", "rest.keystore.p12", "rest.truststore.p12", "client.pem", "client.key"}
    assert {p.name for p in out.iterdir()} == files  # no CA key, no working files left
    assert all(stat.S_IMODE((out / f).stat().st_mode) == 0o600 for f in files)
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(out / "ca.pem"), str(out / "client.pem")],
                            capture_output=True, text=True)  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    keystore = ["openssl", "pkcs12", "-in", str(out / "rest.keystore.p12"), "-nokeys", "-clcerts"]
    keystore += ["-passin", "env:FLINK_TLS_PASSWORD"]
    server = subprocess.run(keystore, env=env, capture_output=True, text=True, check=True)
    names = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName"], input=server.stdout,
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "DNS:flink-jobmanager" in names and "IP Address:127.0.0.1" in names
    before = {f: (out / f).read_bytes() for f in files}
    subprocess.run([str(script), str(out), san], env=env, check=True, capture_output=True)
    assert {f: (out / f).read_bytes() for f in files} == before
    for bad_env, bad_san, says in (
        ({"FLINK_TLS_PASSWORD": "change-me"}, san, "at least 16 characters"),
        ({"FLINK_TLS_PASSWORD": "has spaces and $ signs!!"}, san, "letters, digits"),
        ({}, "DNS:x;touch /tmp/owned", "SAN 'DNS:x;touch /tmp/owned'"),
    ):
        res = subprocess.run([str(script), str(tmp_path / "other"), bad_san], env={**env, **bad_env}, capture_output=True,
                             text=True)  # fmt: skip
        assert res.returncode == 1 and says in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr
        assert "a-long-enough-password" not in res.stderr
    assert not (tmp_path / "other").exists()


def cluster_topology() -> dict[str, str]:
    """``TOPOLOGY`` of scripts/ds2_cluster.py (the local cluster mode), read without running the script."""
    import ast

    tree = ast.parse((ROOT / "scripts" / "ds2_cluster.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TOPOLOGY":
            return ast.literal_eval(node.value)
    raise AssertionError("scripts/ds2_cluster.py has no TOPOLOGY")


def test_the_local_cluster_mode_runs_what_the_compose_file_describes(services):
    """make cluster-up (scripts/ds2_cluster.py and the service scripts) and the compose file: the same
    executor and Celery settings, the same number of Celery workers, Spark workers and their cores,
    TaskManagers and their slots, the same Redis settings file."""
    topology = cluster_topology()
    assert topology["AIRFLOW_EXECUTOR"] == "CeleryExecutor"
    celery = dict(line.split("=", 1) for line in CELERY_ENV.read_text().splitlines() if line and not line.startswith("#"))
    assert celery["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    airflow_sh = (ROOT / "scripts" / "airflow.sh").read_text()
    assert "CELERY_ENV=$ROOT/conf/airflow/celery.env" in airflow_sh and 'done <"$CELERY_ENV"' in airflow_sh
    assert len(AIRFLOW_WORKERS) == int(topology["AIRFLOW_CELERY_WORKERS"])
    assert sorted(n for n in services if n.startswith("airflow-worker-")) == list(AIRFLOW_WORKERS)
    parallelism = services["airflow-scheduler"]["environment"]["AIRFLOW__CORE__PARALLELISM"]
    assert parallelism == topology["AIRFLOW_PARALLELISM"]
    assert sorted(n for n in services if n.startswith("spark-worker")) == list(SPARK_WORKERS)
    assert len(SPARK_WORKERS) == int(topology["SPARK_WORKERS"])
    cores = {services[n]["environment"]["SPARK_WORKER_CORES"] for n in SPARK_WORKERS}
    assert cores == {topology["SPARK_WORKER_CORES"]}
    connect = services["spark-connect"]["command"]
    total = int(topology["SPARK_WORKERS"]) * int(topology["SPARK_WORKER_CORES"])
    assert f"spark.cores.max={total}" in connect  # scripts/spark.sh --cluster sets cores x workers
    assert sorted(n for n in services if n.startswith("flink-taskmanager")) == list(TASKMANAGERS)
    assert len(TASKMANAGERS) == int(topology["FLINK_TASKMANAGERS"])
    for name in TASKMANAGERS:
        assert flink_properties(services[name])["taskmanager.numberOfTaskSlots"] == topology["FLINK_SLOTS"]
    redis = services["redis"]
    assert ("./conf/redis/redis.conf", "/usr/local/etc/redis/redis.conf") in mounts(redis)
    assert "/usr/local/etc/redis/redis.conf" in " ".join(redis["command"])
    # The password is written into an owner-only copy of the settings, never onto redis-server's command line.
    assert "--requirepass" not in " ".join(redis["command"]) and "umask 077" in redis["command"][-1]
    assert "SHARED_CONF=$ROOT/conf/redis/redis.conf" in (ROOT / "scripts" / "redis.sh").read_text()
    assert "appendonly yes" in (ROOT / "conf" / "redis" / "redis.conf").read_text()
    assert not redis.get("ports"), "the broker is reachable inside the compose network only"
    for name in AIRFLOW_SERVICES[1:]:
        assert services[name]["depends_on"]["redis"] == {"condition": "service_healthy"}, name


def test_kafka_runs_from_the_pom_scripts_kafka_sh_resolves_and_flink_gets_its_connector(services):
    """The broker and the connector come from conf/kafka/pom.xml, as on a machine; the broker runs
    conf/kafka/server.properties with a password from .env; every Flink process has the connector in lib/."""
    kafka_sh = (ROOT / "scripts" / "kafka.sh").read_text()
    connector = re.search(r"^CONNECTOR=(\S+)$", kafka_sh, re.M).group(1)
    assert f"CONNECTOR={connector}" in (ROOT / "deploy" / "kafka-jars.sh").read_text()
    version = re.search(r"^KAFKA_VERSION=(\S+)$", kafka_sh, re.M).group(1)
    assert f"<version>{version}</version>" in (ROOT / "conf" / "kafka" / "pom.xml").read_text()
    for name in ("kafka-jars", "kafka"):
        image, tag = image_of(services[name])
        assert image == "maven" and tag.endswith("-eclipse-temurin-17"), f"{name}: Java 17 like the machines"
        assert ("./conf/kafka", "/opt/ds2/conf/kafka") in mounts(services[name])
    broker = services["kafka"]
    assert broker["environment"]["KAFKA_PASSWORD"].startswith("${KAFKA_PASSWORD:?")
    assert mount_of(broker, "/opt/kafka-libs") == ("kafka-libs", "/opt/kafka-libs")
    assert mount_of(broker, f"{DATA_DIR}/kafka/client.properties") == ("ds2-data", DATA_DIR)  # the Airflow side reads it
    assert "ports" not in broker and broker["expose"] == ["9092"]  # inside the compose network only
    for name in ("flink-jobmanager", *TASKMANAGERS):
        assert mount_of(services[name], "/opt/flink/lib/kafka") == ("flink-kafka-connector", "/opt/flink/lib/kafka")
    assert services["flink-jobmanager"]["depends_on"]["kafka-jars"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("bad", ["127.0.0.1:8082/x?y", "ftp://jm:8081", "http://jm:8081 http://jm2:8081", "http://u:p@jm:1"])
def test_a_flink_connections_standby_addresses_are_checked_in_full(monkeypatch, bad):
    import json

    from ds2_airflow.hooks.flink import FlinkHook

    good = {
        "conn_type": "flink",
        "host": "jm-0",
        "port": 8081,
        "extra": {"standby_urls": "http://jm-1:8081, https://[::1]:8081/"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_HA", json.dumps(good))
    assert FlinkHook("flink_ha").connection().standby_urls == ("http://jm-1:8081", "https://[::1]:8081/")
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_HA", json.dumps({**good, "extra": {"standby_urls": [bad]}}))
    with pytest.raises(ValueError, match=r"standby_urls: .* is not an http\(s\)://host\[:port\] address"):
        FlinkHook("flink_ha").connection()
