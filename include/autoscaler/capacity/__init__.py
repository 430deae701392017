"""Cluster capacity: what the cluster offers a plan, and growing or shrinking it.

- :mod:`.inventory`: the TaskManagers Flink reports (slots, free slots, declared cores), the limits a job
  sets, and the check a plan must pass: no more slots than exist, no more busy slots on a TaskManager
  than it has cores, and how many TaskManagers to add first when a provider may;
- :mod:`.provider`: what adds and releases TaskManagers (local processes beside a ``scripts/flink.sh``
  cluster; the Flink Kubernetes Operator's design is in ``docs/deploy.md``), each event recorded in
  the CAPACITY table.
"""
