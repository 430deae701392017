"""How Spark reaches a store on an object store: Hadoop's S3A file system, its jars and its settings.

Spark reads the store's Delta tables as the data files of their latest version, which delta-rs lists
(:func:`autoscaler.store.delta.file_uris`): one consistent version, and no second Delta implementation in
the JVM whose commits would not exclude delta-rs's (Delta on Spark 4.4 still commits to S3 without the
conditional PUT, delta-io/delta#4813). Spark writes through the store's one writer, from its driver.

The jars are Hadoop 3.5.0's ``hadoop-aws`` and the AWS SDK's S3 client (``conf/store/pom.xml``, resolved by
``scripts/s3proxy.sh install`` into ``build/spark-s3a/``, or the ``spark-s3a`` folder of the jars dir).
The settings come from the same ``AWS_*`` variables delta-rs reads, so one set of credentials serves both.
They go with each read as its options; Spark redacts the key and secret where it shows a plan
(``spark.redaction.regex``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from autoscaler.config.paths import jar

JARS_FOLDER = "spark-s3a"


def s3a_jars() -> list[Path]:
    """The S3A jars, if they are installed (none: Spark cannot read an object store, and says so when asked)."""
    folder = jar(JARS_FOLDER)
    return sorted(folder.glob("*.jar")) if folder.is_dir() else []


def s3a_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Hadoop settings (``fs.s3a.*``) for the object store the ``AWS_*`` variables describe. Given as a read's
    options they reach that read's file listing and its tasks only, not the session's configuration."""
    env = os.environ if env is None else env
    settings = {
        # Path-style requests (http://host/bucket/key): what S3-compatible servers answer; S3 itself still does.
        "fs.s3a.path.style.access": "true",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }
    endpoint = env.get("AWS_ENDPOINT_URL", "").strip()
    if endpoint:
        settings["fs.s3a.endpoint"] = endpoint
        settings["fs.s3a.connection.ssl.enabled"] = str(urlsplit(endpoint).scheme == "https").lower()
    region = env.get("AWS_REGION", "").strip()
    if region:
        settings["fs.s3a.endpoint.region"] = region
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        settings["fs.s3a.access.key"] = env["AWS_ACCESS_KEY_ID"]
        settings["fs.s3a.secret.key"] = env["AWS_SECRET_ACCESS_KEY"]
        if env.get("AWS_SESSION_TOKEN"):
            settings["fs.s3a.session.token"] = env["AWS_SESSION_TOKEN"]
            settings["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    else:  # an instance role, a profile: the SDK's own chain
        settings["fs.s3a.aws.credentials.provider"] = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
    return settings


def s3a_uri(uri: str) -> str:
    """A data file's URI as S3A names it (``s3://`` and ``s3a://`` name the same object)."""
    return "s3a://" + uri.split("://", 1)[1] if uri.startswith("s3://") else uri
