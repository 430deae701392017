"""DS2 policy: the pure-Python reference (one epoch) and the rules shared with the Spark job."""
