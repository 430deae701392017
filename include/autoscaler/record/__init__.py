"""Record: what each epoch ended as (``outcomes.py``), the audit trail (``audit.py``) and the loop
report built from it (``loop_report.py``)."""
