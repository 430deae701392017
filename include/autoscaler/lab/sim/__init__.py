"""The lab's simulator: a closed loop that runs the production code against a model of the job (hours in seconds)."""
