"""The workload name charging gives a row's part that no pod's workload requested, apart from the code that splits.

Pages and `billing report` show this name; they import it from here, which
imports only the frames (nothing heavy), rather than from billing.charge.workloads, which imports the
pricing and the collectors behind it (a report would start that much slower). It is declared with the frames whose
rows carry it, where the collectors find it too (a claim no pod mounts, docs/spec.md "Storage").
"""

from billing.frames import UNATTRIBUTED

__all__ = ["UNATTRIBUTED"]
