-- Ledger schema for PostgreSQL (the production target). Must match billing/ledger.py:
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
    quantity    DOUBLE PRECISION NOT NULL,  -- resource-hours attributed to this team
    unit_price  DOUBLE PRECISION NOT NULL,  -- list price per resource-hour
    cost        DOUBLE PRECISION NOT NULL,  -- what the team pays: list_cost less discounts, not rounded
    currency    TEXT NOT NULL,              -- ISO 4217
    computed_at TIMESTAMP WITH TIME ZONE NOT NULL,
    list_cost   DOUBLE PRECISION NOT NULL,  -- quantity * unit_price (the list price)
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);
-- "one team (or one person) over a date range" is the common question
CREATE INDEX chargeback_team_day ON chargeback (team, day);
CREATE INDEX chargeback_owner_day ON chargeback (owner, day);

-- Days a run completed: a day in a report's range that is not here is "missing".
CREATE TABLE completed_days (
    day          DATE NOT NULL PRIMARY KEY,
    completed_at TIMESTAMP WITH TIME ZONE NOT NULL,
    rows         INTEGER NOT NULL,
    directory_note TEXT NOT NULL DEFAULT ''  -- why the run used the last known directory, '' if it did not
);

-- The directory of the last successful run (JSON), kept for directory.on_failure: last_known.
CREATE TABLE directory_snapshots (
    taken_at TIMESTAMP WITH TIME ZONE NOT NULL PRIMARY KEY,
    content  TEXT NOT NULL
);

-- How complete each cluster's data of a day was: the share of the day's instants at which
-- kube-state-metrics series were there. Below 1 Prometheus had a gap, and the day is incomplete.
CREATE TABLE cluster_days (
    day      DATE NOT NULL,
    cluster  TEXT NOT NULL,
    coverage DOUBLE PRECISION NOT NULL,
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
    allocatable DOUBLE PRECISION NOT NULL,  -- resource-hours the nodes offered
    requested   DOUBLE PRECISION NOT NULL,  -- resource-hours requested by Running pods
    idle        DOUBLE PRECISION NOT NULL,  -- allocatable - requested, not below 0
    unit_price  DOUBLE PRECISION NOT NULL,  -- the cluster's price per resource-hour
    idle_cost   DOUBLE PRECISION NOT NULL,  -- idle * unit_price
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
    idle_gpu_hours        DOUBLE PRECISION,  -- NULL: the cluster has no DCGM exporter metrics
    unused_cpu_core_hours DOUBLE PRECISION,  -- NULL: the cluster has no cAdvisor metrics
    PRIMARY KEY (day, cluster, namespace, team)
);

-- Budgets and monthly statements (billing/budgets.py, billing/statement.py).
-- Each budget threshold a team's month crossed, so that its alert goes out once.
CREATE TABLE budget_alerts (
    month     DATE NOT NULL,                -- first day of the month
    team      TEXT NOT NULL,
    threshold DOUBLE PRECISION NOT NULL,    -- a share of the budget from budgets.alert_at
    day       DATE NOT NULL,                -- the run that found it crossed
    spent     DOUBLE PRECISION NOT NULL,    -- the month's cost then
    budget    DOUBLE PRECISION NOT NULL,
    sent_at   TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (month, team, threshold)
);

-- Months finance has closed: their statements are kept in statement_lines.
CREATE TABLE closed_months (
    month        DATE NOT NULL PRIMARY KEY,
    closed_at    TIMESTAMP WITH TIME ZONE NOT NULL,
    closed_by    TEXT NOT NULL,
    missing_days TEXT NOT NULL              -- days never run when it was closed, comma-separated
);

-- The log of every close and reopen.
CREATE TABLE month_closings (
    month     DATE NOT NULL,
    logged_at TIMESTAMP WITH TIME ZONE NOT NULL,
    action    TEXT NOT NULL,                -- close or reopen
    who       TEXT NOT NULL,                -- --by, else the operating-system user
    PRIMARY KEY (month, logged_at)
);

-- A closed month's statement as it was closed, line by line.
CREATE TABLE statement_lines (
    month       DATE NOT NULL,
    line        INTEGER NOT NULL,
    team        TEXT NOT NULL,
    cost_center TEXT NOT NULL,
    cluster     TEXT NOT NULL,
    kind        TEXT NOT NULL,              -- charge, discount, credit, idle, reserved, adjustment
    resource    TEXT NOT NULL,
    gpu_model   TEXT NOT NULL,
    corrects    DATE,                       -- the day an adjustment corrects
    quantity    DOUBLE PRECISION,
    amount      DOUBLE PRECISION NOT NULL,
    currency    TEXT NOT NULL,
    PRIMARY KEY (month, line)
);

-- What a re-run of a closed month's day changed, booked in the first open month.
CREATE TABLE adjustments (
    month     DATE NOT NULL,                -- first day of the month it is booked in
    corrects  DATE NOT NULL,                -- the re-run day
    team      TEXT NOT NULL,
    cluster   TEXT NOT NULL,
    resource  TEXT NOT NULL,
    booked_at TIMESTAMP WITH TIME ZONE NOT NULL,
    amount    DOUBLE PRECISION NOT NULL,    -- new cost less the cost it replaced
    currency  TEXT NOT NULL,
    PRIMARY KEY (month, corrects, team, cluster, resource, booked_at)
);
