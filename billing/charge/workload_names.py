"""The workload name charging gives a row's part that no pod's workload requested, apart from the code that splits.

Pages and `billing report` show this name; they import it from here, which
imports nothing, rather than from billing.charge.workloads, which imports the
pricing and the collectors behind it (a report would start that much slower).
"""

UNATTRIBUTED = "(no workload)"
