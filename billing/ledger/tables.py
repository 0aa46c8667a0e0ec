"""The ledger's tables: `chargeback` (docs/spec.md "Ledger tables"), the source of truth, and the tables written beside it.

The schema is declared here once; Alembic's migrations (billing/ledger/migrations)
create it, and sql/ holds the same as plain DDL. Writing a day is
billing/ledger/write.py, reading it back billing/ledger/read.py.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Date,
    DateTime,
    Double,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
)

metadata = MetaData()


def _charged() -> list[Column]:
    """Who a row is about: a day's namespace on a cluster, the team charged (docs/spec.md "Rule 7: owner and team"), its person."""
    return [
        Column("day", Date, primary_key=True),
        Column("cluster", Text, primary_key=True),
        Column("namespace", Text, primary_key=True),
        Column("team", Text, primary_key=True),
        Column("owner", Text, nullable=True),
    ]


chargeback = Table(
    "chargeback",
    metadata,
    *_charged(),
    # cpu, memory, gpu; reserved-*, credit-*, unrequested-*: reserved pools and shared unrequested capacity
    # (billing/charge/pricing.py)
    Column("resource", Text, primary_key=True),
    Column("gpu_model", Text, primary_key=True),
    Column("quantity", Double, nullable=False),
    Column("unit_price", Double, nullable=False),
    Column("cost", Double, nullable=False),  # what the team pays: list_cost less priority-class discounts
    Column("currency", Text, nullable=False),
    Column("computed_at", DateTime(timezone=True), nullable=False),
    Column("list_cost", Double, nullable=False),  # quantity x unit_price (revision 0002)
    Index("chargeback_team_day", "team", "day"),
    Index("chargeback_owner_day", "owner", "day"),
)


completed_days = Table(
    "completed_days",
    metadata,
    Column("day", Date, primary_key=True),
    Column("completed_at", DateTime(timezone=True), nullable=False),
    Column("rows", Integer, nullable=False),
    # '' when the run read the directory; else why it used the last known one (reports show it)
    Column("directory_note", Text, nullable=False, server_default=""),
)


directory_snapshots = Table(  # the directory of the last successful run, for `on_failure: last_known`
    "directory_snapshots",
    metadata,
    Column("taken_at", DateTime(timezone=True), primary_key=True),
    Column("content", Text, nullable=False),  # JSON, opaque to the ledger
)


cluster_days = Table(  # how complete each cluster's data of a day was (data gaps)
    "cluster_days",
    metadata,
    Column("day", Date, primary_key=True),
    Column("cluster", Text, primary_key=True),
    # share of the day's instants at which kube-state-metrics data was there; below 1 the day is incomplete
    Column("coverage", Double, nullable=False),
    # why the cluster's capacity of the day is unknown (an impossible allocatable figure it did not need to bill);
    # '' where it is known
    Column("capacity_unknown", Text, nullable=False, server_default=""),
)


cluster_capacity = Table(  # what each cluster's nodes offered, and what no request covered
    "cluster_capacity",
    metadata,
    Column("day", Date, primary_key=True),
    Column("cluster", Text, primary_key=True),
    Column("resource", Text, primary_key=True),  # cpu, memory or gpu
    Column("gpu_model", Text, primary_key=True),
    Column("pool", Text, primary_key=True),  # the reserved pool of the nodes, '' for the rest
    Column("allocatable", Double, nullable=False),  # resource-hours the nodes offered
    Column("requested", Double, nullable=False),  # resource-hours requested by Running pods
    Column("unrequested", Double, nullable=False),  # allocatable - requested, not below 0
    Column("unit_price", Double, nullable=False),
    Column("unrequested_cost", Double, nullable=False),  # unrequested x unit_price
)


cluster_storage = Table(  # each cluster's persistent volumes per storage class, and what no claim held (shown only)
    "cluster_storage",
    metadata,
    Column("day", Date, primary_key=True),
    Column("cluster", Text, primary_key=True),
    Column("storageclass", Text, primary_key=True),
    Column("provisioned", Double, nullable=False),  # GiB-hours of every volume visible
    Column("claimed", Double, nullable=False),  # GiB-hours the bound claims were billed
    Column("unclaimed", Double, nullable=False),  # GiB-hours of the volumes Released or Available
    Column("unit_price", Double, nullable=True),  # the class's price per GiB-hour; NULL: the class has none
    Column("unclaimed_cost", Double, nullable=True),  # unclaimed x unit_price, never billed
)


energy = Table(  # kWh and carbon per namespace and team (docs/spec.md "Energy and carbon"); namespace and team '': unattributed
    "energy",
    metadata,
    *_charged()[:4],  # day, cluster, namespace, team: no owner, the kWh being the namespace's
    Column("gpu_kwh", Double, nullable=True),  # NULL: no sample of dcgm-exporter's energy counter (unknown)
    Column("cpu_kwh", Double, nullable=True),  # NULL: no sample of Kepler's counters (unknown)
    Column("carbon_g", Double, nullable=True),  # grams of CO2e; NULL without an intensity or where a part is unknown
    # the namespace's share of the unattributed where the cluster shares it, minus what was shared on the unattributed
    # row; 0 where nothing was (billing/charge/energy.py); its grams of CO2e NULL without an intensity
    Column("shared_kwh", Double, nullable=False, server_default="0"),
    Column("shared_carbon_g", Double, nullable=True, server_default="0"),
)


waste = Table(  # what pods held but did not use, per namespace and team like the costs (billing/collect/waste.py)
    "waste",
    metadata,
    *_charged(),
    Column("idle_gpu_hours", Double, nullable=True),  # GPUs held below the utilisation threshold; NULL: no DCGM
    Column("unused_cpu_core_hours", Double, nullable=True),  # requested but not used; NULL: no cAdvisor
    Column("unused_storage_gib_hours", Double, nullable=True),  # claimed but not used; NULL: no kubelet volume stats
)


gpu_holdings = Table(  # what each `gpu` row held: whole GPUs, MIG slices, time-sliced replicas (GPU sharing)
    "gpu_holdings",
    metadata,
    *_charged(),
    Column("resource", Text, primary_key=True),  # the GPU resource as kube-state-metrics names it
    Column("gpu_model", Text, primary_key=True),
    Column("held_hours", Double, nullable=False),  # hours of the resource's units (slice-hours, replica-hours)
    Column("gpu_hours", Double, nullable=False),  # the physical-GPU-hours the chargeback `gpu` row bills for them
    Column("cost", Double, nullable=False),  # their share of the chargeback row's cost
    Column("currency", Text, nullable=False),
)


bound_pending = Table(  # what pods bound to a node held while Pending (docs/spec.md "Rule 2: running"), priced as usage
    "bound_pending",
    metadata,
    *_charged(),
    # the pods' workload as workload_costs names it where workloads are enabled; '' where they are not (revision 0015)
    Column("workload", Text, primary_key=True),
    Column("resource", Text, primary_key=True),  # cpu, memory or gpu
    Column("gpu_model", Text, primary_key=True),
    # why the pods were not Running: InitContainersRunning, an app container's waiting reason, '' where unknown
    Column("reason", Text, primary_key=True),
    Column("quantity", Double, nullable=False),
    Column("unit_price", Double, nullable=False),
    Column("cost", Double, nullable=False),  # what it costs as Running usage would, priority-class discounts included
    Column("list_cost", Double, nullable=False),
    Column("currency", Text, nullable=False),
    Column("charged", Integer, nullable=False),  # 1: in the chargeback rows too (bound_pending: charge); 0: shown only
)


kueue_unlent = Table(  # what Kueue queues' namespaces borrowed that no team lent (docs/spec.md "Kueue quotas"): shown
    "kueue_unlent",
    metadata,
    *_charged(),
    Column("resource", Text, primary_key=True),  # cpu, memory or gpu
    Column("gpu_model", Text, primary_key=True),
    Column("quantity", Double, nullable=False),  # resource-hours of the namespace's chargeback rows
    Column("cost", Double, nullable=False),  # their part of those rows' cost, which the borrower pays
    Column("currency", Text, nullable=False),
)


workload_costs = Table(
    "workload_costs",
    metadata,
    *_charged(),
    # Kind/name of the top-level controller; Pod/<name> for none; '(no workload)' for a part of a row no pod's
    # workload requested (reserved-*, credit-*, unrequested-* rows; a cluster whose workloads were not collected)
    Column("workload", Text, primary_key=True),
    # JSON object of every configured cost label as Kubernetes names it, json.dumps(..., sort_keys=True) with its
    # default separators: '{"example.com/project": "atlas", "experiment": ""}' ('' where a pod has none);
    # '{}' without cost_labels
    Column("labels", Text, primary_key=True),
    Column("resource", Text, primary_key=True),  # as in chargeback
    Column("gpu_model", Text, primary_key=True),
    Column("quantity", Double, nullable=False),
    Column("cost", Double, nullable=False),
    Column("list_cost", Double, nullable=False),
    Column("currency", Text, nullable=False),
    Index("workload_costs_team_day", "team", "day"),
    Index("workload_costs_owner_day", "owner", "day"),
)


workload_waste = Table(
    "workload_waste",
    metadata,
    *_charged(),
    Column("workload", Text, primary_key=True),
    Column("idle_gpu_hours", Double, nullable=True),
    Column("unused_cpu_core_hours", Double, nullable=True),
    Column("unused_storage_gib_hours", Double, nullable=True),
)


budget_alerts = Table(  # each budget threshold a team's month crossed, so that its alert goes out once
    "budget_alerts",
    metadata,
    Column("month", Date, primary_key=True),  # first day of the month
    Column("team", Text, primary_key=True),
    Column("threshold", Double, primary_key=True),  # a share of the budget from budgets.alert_at
    Column("day", Date, nullable=False),  # the run that found it crossed
    Column("spent", Double, nullable=False),  # the month's cost then
    Column("budget", Double, nullable=False),
    Column("sent_at", DateTime(timezone=True), nullable=False),
)


deliveries = Table(  # each message to one address (a day's summary, a budget alert), so that it goes out once
    "deliveries",
    metadata,
    Column("day", Date, primary_key=True),  # a summary's day; a budget alert's month (its first day)
    Column("message", Text, primary_key=True),  # the message and its recipient: `<day>-admins-<address>`, …
    Column("address", Text, nullable=False),
    Column("claimed_at", DateTime(timezone=True), nullable=True),  # when a run began sending it; None: owed, nobody is
    Column("delivered_at", DateTime(timezone=True), nullable=True),  # None: not delivered yet
    Column("message_id", Text, nullable=True),  # its Message-ID, sent again unchanged by a run that takes it over
    Column("taken_over_at", DateTime(timezone=True), nullable=True),  # set: it may have arrived twice
)


closed_months = Table(  # months finance has closed: their statements are kept in statement_lines
    "closed_months",
    metadata,
    Column("month", Date, primary_key=True),
    Column("closed_at", DateTime(timezone=True), nullable=False),
    Column("closed_by", Text, nullable=False),
    Column("missing_days", Text, nullable=False),  # days never run when it was closed, comma-separated
)


month_closings = Table(  # the log of every close and reopen
    "month_closings",
    metadata,
    Column("month", Date, primary_key=True),
    Column("logged_at", DateTime(timezone=True), primary_key=True),
    Column("action", Text, nullable=False),  # close or reopen
    Column("who", Text, nullable=False),  # --by, else the operating-system user
)


invoices = Table(  # what a cloud cluster cost in a month, from its provider's FOCUS export (billing invoice import):
    "invoices",      # one row per file, the month's cost their sum (a bill may come in several files, --add)
    metadata,
    Column("month", Date, primary_key=True),
    Column("cluster", Text, primary_key=True),
    Column("sha256", Text, primary_key=True),  # of the file as imported: the same file is not imported twice
    Column("billed_cost", Double, nullable=False),  # BilledCost summed over the rows recover.invoice_match matched
    Column("currency", Text, nullable=False),
    Column("file_name", Text, nullable=False),
    Column("rows_read", Integer, nullable=False),
    Column("rows_matched", Integer, nullable=False),
    Column("imported_at", DateTime(timezone=True), nullable=False),
    Column("imported_by", Text, nullable=False),
)


statement_lines = Table(  # a closed month's statement as it was closed, line by line
    "statement_lines",
    metadata,
    Column("month", Date, primary_key=True),
    Column("line", Integer, primary_key=True, autoincrement=False),
    Column("team", Text, nullable=False),
    Column("cost_center", Text, nullable=False),
    Column("cluster", Text, nullable=False),
    # charge, discount, credit, unrequested, reserved, correction, recovery, subsidy, monthly-credit, allocation, overage
    Column("kind", Text, nullable=False),
    Column("resource", Text, nullable=False),
    Column("gpu_model", Text, nullable=False),
    Column("corrects", Date, nullable=True),  # the day a correction corrects
    Column("quantity", Double, nullable=True),
    Column("amount", Double, nullable=False),
    Column("currency", Text, nullable=False),
    Column("service_units", Double, nullable=True),  # SU of a charge line; NULL: none (docs/spec.md)
)


corrections = Table(  # what a re-run of a closed month's day changed, booked in the first open month
    "corrections",
    metadata,
    Column("month", Date, primary_key=True),  # first day of the month it is booked in
    Column("corrects", Date, primary_key=True),  # the re-run day
    Column("team", Text, primary_key=True),
    Column("cluster", Text, primary_key=True),
    Column("resource", Text, primary_key=True),
    Column("booked_at", DateTime(timezone=True), primary_key=True),
    Column("amount", Double, nullable=False),  # new cost less the cost it replaced
    Column("currency", Text, nullable=False),
)


journal_lines = Table(  # the finance office's journal of a closed month, one posting per close (docs/spec.md "Accounts")
    "journal_lines",
    metadata,
    Column("month", Date, primary_key=True),  # first day
    Column("posting", Integer, primary_key=True),  # 1, 2, ... in the order posted
    Column("line", Integer, primary_key=True),
    Column("kind", Text, nullable=False),  # 'journal', or 'reversal' of the posting before it
    Column("posted_at", DateTime(timezone=True), nullable=False),
    Column("account", Text, nullable=False),
    Column("object_code", Text, nullable=False),
    Column("debit_cents", BigInteger, nullable=False),  # whole cents: a journal is money to the cent, exactly
    Column("credit_cents", BigInteger, nullable=False),
    Column("reference", Text, nullable=False),
)


allocation_draws = Table(  # each night's use of an allocation per team and cluster, and what it drew (docs/spec.md "Allocations")
    "allocation_draws",
    metadata,
    Column("account", Text, primary_key=True),
    Column("starts", Date, primary_key=True),  # the allocation's first day: an account's allocations do not overlap
    Column("day", Date, primary_key=True),
    Column("team", Text, primary_key=True),
    Column("cluster", Text, primary_key=True),
    Column("used", Double, nullable=False),  # the account's share of the night's charges, in SU or money
    Column("used_cost", Double, nullable=False),  # the same in money
    Column("drawn", Double, nullable=False),  # of it, what the allocation still held (in its unit)
    Column("drawn_cost", Double, nullable=False),  # the same in money: what the allocation prepaid
    Column("currency", Text, nullable=False),
)


allocation_alerts = Table(  # each threshold of an allocation crossed, so that its alert goes out once
    "allocation_alerts",
    metadata,
    Column("account", Text, primary_key=True),
    Column("starts", Date, primary_key=True),
    Column("threshold", Double, primary_key=True),  # percent drawn, from the allocation's thresholds
    Column("day", Date, nullable=False),  # the run that found it crossed
    Column("drawn", Double, nullable=False),  # drawn to date then, in the allocation's unit
    Column("amount", Double, nullable=False),
    Column("sent_at", DateTime(timezone=True), nullable=False),
)


LEDGER_COLUMNS = [c.name for c in chargeback.columns]


NAME_COLUMNS = ["cluster", "namespace", "team", "owner", "gpu_model"]


# Kubernetes' longest names (DNS subdomains); far longer ones are not real names, and PostgreSQL
# could not index them anyway (a key entry must fit in a third of a page).
