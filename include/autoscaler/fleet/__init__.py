"""The fleet path: every due job's epoch collected, validated, decided by policy and rules in one run.

:mod:`.interval` holds the stages for a list of jobs, each step of the per-job DAG done once for all
(collection concurrently, validation in one process, the policy in one Spark query); a job's failure
at any stage is its own verdict, never the batch's. Only jobs whose plan is a rescale go on to a
per-job run (approval and rescale); the others are recorded by the fleet run itself.
"""
