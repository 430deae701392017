"""Configuration: the registered jobs (``jobs.py``) and every option with its default (``options.py``)."""
