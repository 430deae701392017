"""Tuning beyond parallelism (Demeter's multi-configuration tuning): profiling copies beside the job, a model
of performance against configuration, and the cheapest configuration that holds the forecast.

- :mod:`.configuration`: what is tuned (parallelism, checkpoint interval, memory per slot, managed fraction)
  and the candidates;
- :mod:`.site`: where profiling copies run (a Flink cluster of their own per copy);
- :mod:`.profile`: a round of copies, measured and cleaned up within a budget;
- :mod:`.model`: Gaussian processes, expected improvement, the recommendation;
- :mod:`.round`: one round of a job, from the forecast to the recorded recommendation;
- :mod:`.apply`: the recommendation applied through savepoint-and-restart and the capacity provider.

Pure Python: no Airflow import.
"""
