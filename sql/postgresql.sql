-- The ledger schema for postgresql, written by `python -m billing.ledger.schema_sql postgresql` from the migrations.

BEGIN;

CREATE TABLE alembic_version (
    version_num VARCHAR(32) NOT NULL,
    CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);

-- Running upgrade  -> 0001

CREATE TABLE chargeback (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    quantity DOUBLE PRECISION NOT NULL,
    unit_price DOUBLE PRECISION NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    computed_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);

CREATE INDEX chargeback_team_day ON chargeback (team, day);

CREATE INDEX chargeback_owner_day ON chargeback (owner, day);

CREATE TABLE completed_days (
    day DATE NOT NULL,
    completed_at TIMESTAMP WITH TIME ZONE NOT NULL,
    rows INTEGER NOT NULL,
    directory_note TEXT DEFAULT '' NOT NULL,
    PRIMARY KEY (day)
);

CREATE TABLE directory_snapshots (
    taken_at TIMESTAMP WITH TIME ZONE NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (taken_at)
);

CREATE TABLE cluster_days (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    coverage DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (day, cluster)
);

INSERT INTO alembic_version (version_num) VALUES ('0001') RETURNING alembic_version.version_num;

-- Running upgrade 0001 -> 0002

ALTER TABLE chargeback ADD COLUMN list_cost DOUBLE PRECISION;

UPDATE chargeback SET list_cost = cost;

ALTER TABLE chargeback ALTER COLUMN list_cost SET NOT NULL;

CREATE TABLE cluster_capacity (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    pool TEXT NOT NULL,
    allocatable DOUBLE PRECISION NOT NULL,
    requested DOUBLE PRECISION NOT NULL,
    idle DOUBLE PRECISION NOT NULL,
    unit_price DOUBLE PRECISION NOT NULL,
    idle_cost DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (day, cluster, resource, gpu_model, pool)
);

CREATE TABLE waste (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    idle_gpu_hours DOUBLE PRECISION,
    unused_cpu_core_hours DOUBLE PRECISION,
    PRIMARY KEY (day, cluster, namespace, team)
);

UPDATE alembic_version SET version_num='0002' WHERE alembic_version.version_num = '0001';

-- Running upgrade 0002 -> 0003

CREATE TABLE gpu_holdings (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    held_hours DOUBLE PRECISION NOT NULL,
    gpu_hours DOUBLE PRECISION NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);

UPDATE alembic_version SET version_num='0003' WHERE alembic_version.version_num = '0002';

-- Running upgrade 0003 -> 0004

CREATE TABLE budget_alerts (
    month DATE NOT NULL,
    team TEXT NOT NULL,
    threshold DOUBLE PRECISION NOT NULL,
    day DATE NOT NULL,
    spent DOUBLE PRECISION NOT NULL,
    budget DOUBLE PRECISION NOT NULL,
    sent_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (month, team, threshold)
);

CREATE TABLE closed_months (
    month DATE NOT NULL,
    closed_at TIMESTAMP WITH TIME ZONE NOT NULL,
    closed_by TEXT NOT NULL,
    missing_days TEXT NOT NULL,
    PRIMARY KEY (month)
);

CREATE TABLE month_closings (
    month DATE NOT NULL,
    logged_at TIMESTAMP WITH TIME ZONE NOT NULL,
    action TEXT NOT NULL,
    who TEXT NOT NULL,
    PRIMARY KEY (month, logged_at)
);

CREATE TABLE statement_lines (
    month DATE NOT NULL,
    line INTEGER NOT NULL,
    team TEXT NOT NULL,
    cost_center TEXT NOT NULL,
    cluster TEXT NOT NULL,
    kind TEXT NOT NULL,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    corrects DATE,
    quantity DOUBLE PRECISION,
    amount DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (month, line)
);

CREATE TABLE adjustments (
    month DATE NOT NULL,
    corrects DATE NOT NULL,
    team TEXT NOT NULL,
    cluster TEXT NOT NULL,
    resource TEXT NOT NULL,
    booked_at TIMESTAMP WITH TIME ZONE NOT NULL,
    amount DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (month, corrects, team, cluster, resource, booked_at)
);

UPDATE alembic_version SET version_num='0004' WHERE alembic_version.version_num = '0003';

-- Running upgrade 0004 -> 0005

CREATE TABLE workload_costs (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    workload TEXT NOT NULL,
    labels TEXT NOT NULL,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    quantity DOUBLE PRECISION NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    list_cost DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, workload, labels, resource, gpu_model)
);

CREATE INDEX workload_costs_team_day ON workload_costs (team, day);

CREATE INDEX workload_costs_owner_day ON workload_costs (owner, day);

CREATE TABLE workload_waste (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    workload TEXT NOT NULL,
    idle_gpu_hours DOUBLE PRECISION,
    unused_cpu_core_hours DOUBLE PRECISION,
    PRIMARY KEY (day, cluster, namespace, team, workload)
);

UPDATE alembic_version SET version_num='0005' WHERE alembic_version.version_num = '0004';

-- Running upgrade 0005 -> 0006

CREATE TABLE deliveries (
    day DATE NOT NULL,
    message TEXT NOT NULL,
    address TEXT NOT NULL,
    claimed_at TIMESTAMP WITH TIME ZONE NOT NULL,
    delivered_at TIMESTAMP WITH TIME ZONE,
    PRIMARY KEY (day, message)
);

UPDATE alembic_version SET version_num='0006' WHERE alembic_version.version_num = '0005';

-- Running upgrade 0006 -> 0007

UPDATE workload_costs SET workload = '(no workload)' WHERE workload = '(namespace)';

UPDATE statement_lines SET kind = 'unrequested' WHERE kind = 'idle';

UPDATE alembic_version SET version_num='0007' WHERE alembic_version.version_num = '0006';

-- Running upgrade 0007 -> 0008

CREATE TABLE invoices (
    month DATE NOT NULL,
    cluster TEXT NOT NULL,
    billed_cost DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    file_name TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    rows_read INTEGER NOT NULL,
    rows_matched INTEGER NOT NULL,
    imported_at TIMESTAMP WITH TIME ZONE NOT NULL,
    imported_by TEXT NOT NULL,
    PRIMARY KEY (month, cluster)
);

UPDATE alembic_version SET version_num='0008' WHERE alembic_version.version_num = '0007';

-- Running upgrade 0008 -> 0009

CREATE TABLE invoice_files (
    month DATE NOT NULL,
    cluster TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    billed_cost DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    file_name TEXT NOT NULL,
    rows_read INTEGER NOT NULL,
    rows_matched INTEGER NOT NULL,
    imported_at TIMESTAMP WITH TIME ZONE NOT NULL,
    imported_by TEXT NOT NULL,
    PRIMARY KEY (month, cluster, sha256)
);

INSERT INTO invoice_files (month, cluster, sha256, billed_cost, currency, file_name, rows_read, rows_matched, imported_at, imported_by) SELECT month, cluster, sha256, billed_cost, currency, file_name, rows_read, rows_matched, imported_at, imported_by FROM invoices;

DROP TABLE invoices;

ALTER TABLE invoice_files RENAME TO invoices;

UPDATE alembic_version SET version_num='0009' WHERE alembic_version.version_num = '0008';

-- Running upgrade 0009 -> 0010

UPDATE statement_lines SET kind = 'correction' WHERE kind = 'adjustment';

ALTER TABLE adjustments RENAME TO corrections;

ALTER TABLE corrections RENAME CONSTRAINT adjustments_pkey TO corrections_pkey;

UPDATE alembic_version SET version_num='0010' WHERE alembic_version.version_num = '0009';

-- Running upgrade 0010 -> 0011

UPDATE chargeback SET resource = 'unrequested-' || substr(resource, 6) WHERE substr(resource, 1, 5) = 'idle-';

UPDATE workload_costs SET resource = 'unrequested-' || substr(resource, 6) WHERE substr(resource, 1, 5) = 'idle-';

UPDATE statement_lines SET resource = 'unrequested-' || substr(resource, 6) WHERE substr(resource, 1, 5) = 'idle-';

UPDATE corrections SET resource = 'unrequested-' || substr(resource, 6) WHERE substr(resource, 1, 5) = 'idle-';

ALTER TABLE cluster_capacity RENAME COLUMN idle TO unrequested;

ALTER TABLE cluster_capacity RENAME COLUMN idle_cost TO unrequested_cost;

UPDATE alembic_version SET version_num='0011' WHERE alembic_version.version_num = '0010';

-- Running upgrade 0011 -> 0012

ALTER TABLE deliveries ALTER COLUMN claimed_at DROP NOT NULL;

ALTER TABLE deliveries ADD COLUMN message_id TEXT;

ALTER TABLE deliveries ADD COLUMN taken_over_at TIMESTAMP WITH TIME ZONE;

UPDATE alembic_version SET version_num='0012' WHERE alembic_version.version_num = '0011';

-- Running upgrade 0012 -> 0013

CREATE TABLE bound_pending (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    reason TEXT NOT NULL,
    quantity DOUBLE PRECISION NOT NULL,
    unit_price DOUBLE PRECISION NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    list_cost DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    charged INTEGER NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model, reason)
);

UPDATE alembic_version SET version_num='0013' WHERE alembic_version.version_num = '0012';

-- Running upgrade 0013 -> 0014

CREATE TABLE kueue_unlent (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    quantity DOUBLE PRECISION NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);

UPDATE alembic_version SET version_num='0014' WHERE alembic_version.version_num = '0013';

-- Running upgrade 0014 -> 0015

ALTER TABLE bound_pending RENAME TO bound_pending_0013;

ALTER TABLE bound_pending_0013 RENAME CONSTRAINT bound_pending_pkey TO bound_pending_0013_pkey;

CREATE TABLE bound_pending (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    workload TEXT NOT NULL,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    reason TEXT NOT NULL,
    quantity DOUBLE PRECISION NOT NULL,
    unit_price DOUBLE PRECISION NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    list_cost DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    charged INTEGER NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, workload, resource, gpu_model, reason)
);

INSERT INTO bound_pending (day, cluster, namespace, team, owner, resource, gpu_model, reason, quantity, unit_price, cost, list_cost, currency, charged, workload) SELECT day, cluster, namespace, team, owner, resource, gpu_model, reason, quantity, unit_price, cost, list_cost, currency, charged, '' FROM bound_pending_0013;

DROP TABLE bound_pending_0013;

UPDATE alembic_version SET version_num='0015' WHERE alembic_version.version_num = '0014';

-- Running upgrade 0015 -> 0016

ALTER TABLE cluster_days ADD COLUMN capacity_unknown TEXT DEFAULT '' NOT NULL;

UPDATE alembic_version SET version_num='0016' WHERE alembic_version.version_num = '0015';

-- Running upgrade 0016 -> 0017

ALTER TABLE statement_lines ADD COLUMN service_units DOUBLE PRECISION;

UPDATE alembic_version SET version_num='0017' WHERE alembic_version.version_num = '0016';

-- Running upgrade 0017 -> 0018

CREATE TABLE journal_lines (
    month DATE NOT NULL,
    posting INTEGER NOT NULL,
    line INTEGER NOT NULL,
    kind TEXT NOT NULL,
    posted_at TIMESTAMP WITH TIME ZONE NOT NULL,
    account TEXT NOT NULL,
    object_code TEXT NOT NULL,
    debit_cents BIGINT NOT NULL,
    credit_cents BIGINT NOT NULL,
    reference TEXT NOT NULL,
    PRIMARY KEY (month, posting, line)
);

UPDATE alembic_version SET version_num='0018' WHERE alembic_version.version_num = '0017';

-- Running upgrade 0018 -> 0019

CREATE TABLE cluster_storage (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    storageclass TEXT NOT NULL,
    provisioned DOUBLE PRECISION NOT NULL,
    claimed DOUBLE PRECISION NOT NULL,
    unclaimed DOUBLE PRECISION NOT NULL,
    unit_price DOUBLE PRECISION,
    unclaimed_cost DOUBLE PRECISION,
    PRIMARY KEY (day, cluster, storageclass)
);

UPDATE alembic_version SET version_num='0019' WHERE alembic_version.version_num = '0018';

-- Running upgrade 0019 -> 0020

ALTER TABLE waste ADD COLUMN unused_storage_gib_hours DOUBLE PRECISION;

ALTER TABLE workload_waste ADD COLUMN unused_storage_gib_hours DOUBLE PRECISION;

UPDATE alembic_version SET version_num='0020' WHERE alembic_version.version_num = '0019';

-- Running upgrade 0020 -> 0021

CREATE TABLE allocation_draws (
    account TEXT NOT NULL,
    starts DATE NOT NULL,
    day DATE NOT NULL,
    team TEXT NOT NULL,
    cluster TEXT NOT NULL,
    used DOUBLE PRECISION NOT NULL,
    used_cost DOUBLE PRECISION NOT NULL,
    drawn DOUBLE PRECISION NOT NULL,
    drawn_cost DOUBLE PRECISION NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (account, starts, day, team, cluster)
);

CREATE TABLE allocation_alerts (
    account TEXT NOT NULL,
    starts DATE NOT NULL,
    threshold DOUBLE PRECISION NOT NULL,
    day DATE NOT NULL,
    drawn DOUBLE PRECISION NOT NULL,
    amount DOUBLE PRECISION NOT NULL,
    sent_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (account, starts, threshold)
);

UPDATE alembic_version SET version_num='0021' WHERE alembic_version.version_num = '0020';

-- Running upgrade 0021 -> 0022

CREATE TABLE energy (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    gpu_kwh DOUBLE PRECISION,
    cpu_kwh DOUBLE PRECISION,
    carbon_g DOUBLE PRECISION,
    PRIMARY KEY (day, cluster, namespace, team)
);

UPDATE alembic_version SET version_num='0022' WHERE alembic_version.version_num = '0021';

-- Running upgrade 0022 -> 0023

ALTER TABLE energy ADD COLUMN shared_kwh DOUBLE PRECISION DEFAULT '0' NOT NULL;

ALTER TABLE energy ADD COLUMN shared_carbon_g DOUBLE PRECISION DEFAULT '0';

UPDATE alembic_version SET version_num='0023' WHERE alembic_version.version_num = '0022';

COMMIT;
