"""The bundled Flink test job (``flink-job/``): where its jar is built, and how its parallelism is set.

Used by the demo, the tests, the benchmarks and (later) the policy lab, so that its operator
names and program arguments are written once. Built by ``flink-job/build.sh``.
"""

from __future__ import annotations

from autoscaler.config import paths

JAR = paths.jar("ds2-testjob.jar")  # the checkout's build/, or the copy shipped in the package
# Operator name -> the program argument that sets its parallelism (JobDeployment.parallelism_args).
PARALLELISM_ARGS = {"Parse": "--parse-parallelism", "Count": "--count-parallelism", "Sink: Writer": "--sink-parallelism"}
