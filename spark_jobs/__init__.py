"""The policy's Spark job, shipped as a package so that an installed autoscaler finds the file spark-submit runs
(``autoscaler.config.paths.spark_application``). Nothing else lives here: run as a script, the file's folder
comes first on the path and must shadow no module."""
