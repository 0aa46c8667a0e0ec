-- Ledger schema for SQLite (the default, embedded). Must match billing/ledger.py:
-- tests/test_ledger.py and tests/integration/test_postgres.py check that it does.

-- One row per day, cluster, namespace, team, resource and GPU model (SPEC.md).
CREATE TABLE chargeback (
    day         DATE NOT NULL,              -- billing day in the configured time zone
    cluster     TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    team        TEXT NOT NULL,              -- team charged (SPEC.md rule 7)
    owner       TEXT,                       -- person uid for a personal namespace
    resource    TEXT NOT NULL,              -- cpu, memory, gpu, and reserved-/credit-/idle-<resource>
    gpu_model   TEXT NOT NULL,              -- '' unless resource = 'gpu'
    quantity    REAL NOT NULL,              -- resource-hours attributed to this team
    unit_price  REAL NOT NULL,              -- list price per resource-hour
    cost        REAL NOT NULL,              -- what the team pays: list_cost less discounts, not rounded
    currency    TEXT NOT NULL,              -- ISO 4217
    computed_at DATETIME NOT NULL,
    list_cost   REAL NOT NULL,              -- quantity * unit_price (the list price)
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);
-- "one team (or one person) over a date range" is the common question
CREATE INDEX chargeback_team_day ON chargeback (team, day);
CREATE INDEX chargeback_owner_day ON chargeback (owner, day);

-- Days a run completed: a day in a report's range that is not here is "missing".
CREATE TABLE completed_days (
    day          DATE NOT NULL PRIMARY KEY,
    completed_at DATETIME NOT NULL,
    rows         INTEGER NOT NULL,
    directory_note TEXT NOT NULL DEFAULT ''  -- why the run used the last known directory, '' if it did not
);

-- The directory of the last successful run (JSON), kept for directory.on_failure: last_known.
CREATE TABLE directory_snapshots (
    taken_at DATETIME NOT NULL PRIMARY KEY,
    content  TEXT NOT NULL
);

-- How complete each cluster's data of a day was: the share of the day's instants at which
-- kube-state-metrics series were there. Below 1 Prometheus had a gap, and the day is incomplete.
CREATE TABLE cluster_days (
    day      DATE NOT NULL,
    cluster  TEXT NOT NULL,
    coverage REAL NOT NULL,
    PRIMARY KEY (day, cluster)
);

-- What each cluster's nodes offered (kube_node_status_allocatable) on the day's instants, what Running
-- pods requested, and what no request covered: requested + idle = allocatable, in resource-hours.
CREATE TABLE cluster_capacity (
    day         DATE NOT NULL,
    cluster     TEXT NOT NULL,
    resource    TEXT NOT NULL,              -- cpu, memory or gpu
    gpu_model   TEXT NOT NULL,              -- '' unless resource = 'gpu'
    pool        TEXT NOT NULL,              -- the reserved pool of the nodes, '' for the rest
    allocatable REAL NOT NULL,              -- resource-hours the nodes offered
    requested   REAL NOT NULL,              -- resource-hours requested by Running pods
    idle        REAL NOT NULL,              -- allocatable - requested, not below 0
    unit_price  REAL NOT NULL,              -- the cluster's price per resource-hour
    idle_cost   REAL NOT NULL,              -- idle * unit_price
    PRIMARY KEY (day, cluster, resource, gpu_model, pool)
);

-- What pods held but did not use (billing stays request-based), split over a namespace's teams like its
-- costs: GPUs the DCGM exporter saw below the configured utilisation, CPU requested but not used (cAdvisor).
CREATE TABLE waste (
    day         DATE NOT NULL,
    cluster     TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    team        TEXT NOT NULL,
    owner       TEXT,                       -- person uid for a personal namespace
    idle_gpu_hours        REAL,              -- NULL: the cluster has no DCGM exporter metrics
    unused_cpu_core_hours REAL,              -- NULL: the cluster has no cAdvisor metrics
    PRIMARY KEY (day, cluster, namespace, team)
);

-- What each `gpu` row of chargeback held, per GPU resource as kube-state-metrics names it (whole GPUs,
-- MIG slices like nvidia_com_mig_1g_10gb, time-sliced replicas): the rows of a (day, cluster, namespace,
-- team, gpu_model) add up to its chargeback `gpu` row in gpu_hours and cost.
CREATE TABLE gpu_holdings (
    day         DATE NOT NULL,
    cluster     TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    team        TEXT NOT NULL,
    owner       TEXT,                       -- person uid for a personal namespace
    resource    TEXT NOT NULL,              -- the GPU resource held, e.g. nvidia_com_mig_1g_10gb
    gpu_model   TEXT NOT NULL,              -- the node's model label, as on the chargeback row
    held_hours  REAL NOT NULL,              -- hours of that resource's units (slice-hours, replica-hours)
    gpu_hours   REAL NOT NULL,              -- the physical-GPU-hours billed for them
    cost        REAL NOT NULL,              -- their share of the chargeback row's cost
    currency    TEXT NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);
