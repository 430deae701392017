# The Airflow image of the compose deployment (docker-compose.yaml): the official Airflow 3.3.2 image
# (Python 3.11, the project's Python) plus
#   - a Java 17 runtime from Debian: the DS2 policy is submitted with spark-submit from the scheduler
#     (LocalExecutor runs tasks there), and the Spark driver is a JVM; with openssl, its keytool makes
#     Flink's REST TLS material (deploy/flink-tls.sh, run by ds2-volumes-init);
#   - the provider's runtime dependencies with its celery and postgres extras, at the exact versions of
#     requirements.txt (Airflow 3.3.2 itself, the Spark provider, pyspark 4.2.0, Great Expectations, ...);
#   - the project itself, installed editable from /opt/ds2 (packages in include/ and plugins/), so the
#     compose file's bind mounts of include/, plugins/, dags/, ... replace the copied code live.
# Build context: the repository root (deploy/airflow.Dockerfile.dockerignore keeps .venv, data/ and
# build/ out of it). The version here must equal the apache-airflow pin in requirements.txt and the
# Python version the project's (tests/unit/test_compose.py checks both).
FROM apache/airflow:3.3.2-python3.11

USER root
# /usr/share/man/man1: the JRE's postinst links man pages there, and the slim Debian base lacks it.
# JAVA_HOME: a stable path whatever the architecture (java-17-openjdk-amd64 / -arm64).
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless openssl \
    && apt-get autoremove -yqq --purge \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* \
    && ln -sfn "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/ds2-java \
    && mkdir -p /opt/ds2/data /opt/ds2/build \
    && chown -R airflow:0 /opt/ds2 \
    && chmod -R g+rwX /opt/ds2
ENV JAVA_HOME=/usr/lib/jvm/ds2-java

USER airflow
# Dependencies first (their layer survives code changes): the provider's runtime dependencies and its celery,
# postgres and s3 extras from pyproject.toml, at requirements.txt's exact versions (deploy/install-deps.py; never
# the dev extra). requirements.txt pins apache-airflow==3.3.2, the version already in the image.
COPY --chown=airflow:0 requirements.txt pyproject.toml /opt/ds2/
COPY --chown=airflow:0 deploy/install-deps.py /opt/ds2/deploy/install-deps.py
RUN cd /opt/ds2 && python deploy/install-deps.py celery postgres s3

# The project (--no-deps: everything it needs is pinned above).
COPY --chown=airflow:0 README.md /opt/ds2/
COPY --chown=airflow:0 include /opt/ds2/include
COPY --chown=airflow:0 plugins /opt/ds2/plugins
COPY --chown=airflow:0 dags /opt/ds2/dags
COPY --chown=airflow:0 spark_jobs /opt/ds2/spark_jobs
COPY --chown=airflow:0 bin /opt/ds2/bin
COPY --chown=airflow:0 conf /opt/ds2/conf
COPY --chown=airflow:0 deploy /opt/ds2/deploy
RUN pip install --no-cache-dir --no-deps -e /opt/ds2 && rm -rf /opt/ds2/ds2_autoscaler.egg-info

# The project's conventions inside the containers (docker-compose.yaml sets the same).
ENV DS2_DATA_DIR=/opt/ds2/data \
    DS2_JOBS_CONFIG=/opt/ds2/include/jobs.yaml \
    SPARK_CONF_DIR=/opt/ds2/conf/spark \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/ds2/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/ds2/plugins \
    AIRFLOW__CORE__LOAD_EXAMPLES=false
