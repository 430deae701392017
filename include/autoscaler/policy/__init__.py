"""Policies: each kind is one module behind :mod:`autoscaler.policy.base` (a pure function of an
epoch's metrics); ``spark/`` evaluates them over any number of epochs."""
