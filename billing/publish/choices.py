"""The words `billing report`, `statement` and `export` offer, kept apart from the code that answers them.

billing/cli.py builds its options' choices and help texts from these as it
starts. This module imports nothing, where the modules behind the commands
import pandas and SQLAlchemy, so `billing --help` (and every command's
option parsing) starts at once; each of those modules takes its words from here.
"""

# --by word -> ledger column
GROUPINGS = {
    "team": "team",
    "person": "owner",
    "namespace": "namespace",
    "cluster": "cluster",
    "resource": "resource",
    "gpu_model": "gpu_model",
    "day": "day",
}

# below the namespace (docs/spec.md "Workloads and experiment labels"): --by workload, --by label:NAME
WORKLOAD = "workload"
LABEL_PREFIX = "label:"

REPORT_FORMATS = ("table", "csv", "json", "html")  # billing report --format (billing.publish.report_formats)
STATEMENT_FORMATS = ("csv", "json", "html")  # billing statement --format (billing.publish.statement_formats)

FOCUS_VERSIONS = ("1.3", "1.4", "1.2")  # the FinOps FOCUS releases billing export writes, the default first (billing.publish.focus)
# FOCUS 1.4's datasets, Cost and Usage first (billing.publish.focus) and the invoices' (billing.publish.focus_invoices)
COST_AND_USAGE, INVOICE_DETAIL, BILLING_PERIOD = "cost-and-usage", "invoice-detail", "billing-period"
FOCUS_DATASETS = (COST_AND_USAGE, INVOICE_DETAIL, BILLING_PERIOD)
