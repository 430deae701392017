"""The bundled Flink test job (``flink-job/``): where its jar is built, and how its parallelism is set.

Used by the demo, the tests, the benchmarks and (later) the policy lab, so that its operator
names and program arguments are written once. Built by ``flink-job/build.sh``.
"""

from __future__ import annotations

from pathlib import Path

JAR = Path(__file__).resolve().parents[2] / "build" / "ds2-testjob.jar"
# Operator name -> the program argument that sets its parallelism (JobDeployment.parallelism_args).
PARALLELISM_ARGS = {"Parse": "--parse-parallelism", "Count": "--count-parallelism", "Sink: Writer": "--sink-parallelism"}
