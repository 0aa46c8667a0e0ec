-- The ledger schema for sqlite, written by `python -m billing.ledger.schema_sql sqlite` from the migrations.

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
    quantity DOUBLE NOT NULL,
    unit_price DOUBLE NOT NULL,
    cost DOUBLE NOT NULL,
    currency TEXT NOT NULL,
    computed_at DATETIME NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);

CREATE INDEX chargeback_team_day ON chargeback (team, day);

CREATE INDEX chargeback_owner_day ON chargeback (owner, day);

CREATE TABLE completed_days (
    day DATE NOT NULL,
    completed_at DATETIME NOT NULL,
    rows INTEGER NOT NULL,
    directory_note TEXT DEFAULT '' NOT NULL,
    PRIMARY KEY (day)
);

CREATE TABLE directory_snapshots (
    taken_at DATETIME NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (taken_at)
);

CREATE TABLE cluster_days (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    coverage DOUBLE NOT NULL,
    PRIMARY KEY (day, cluster)
);

INSERT INTO alembic_version (version_num) VALUES ('0001') RETURNING version_num;

-- Running upgrade 0001 -> 0002

ALTER TABLE chargeback ADD COLUMN list_cost DOUBLE;

UPDATE chargeback SET list_cost = cost;

CREATE TABLE _alembic_tmp_chargeback (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    quantity DOUBLE NOT NULL,
    unit_price DOUBLE NOT NULL,
    cost DOUBLE NOT NULL,
    currency TEXT NOT NULL,
    computed_at DATETIME NOT NULL,
    list_cost DOUBLE NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);

INSERT INTO _alembic_tmp_chargeback (day, cluster, namespace, team, owner, resource, gpu_model, quantity, unit_price, cost, currency, computed_at, list_cost) SELECT chargeback.day, chargeback.cluster, chargeback.namespace, chargeback.team, chargeback.owner, chargeback.resource, chargeback.gpu_model, chargeback.quantity, chargeback.unit_price, chargeback.cost, chargeback.currency, chargeback.computed_at, chargeback.list_cost
FROM chargeback;

DROP TABLE chargeback;

ALTER TABLE _alembic_tmp_chargeback RENAME TO chargeback;

CREATE INDEX chargeback_team_day ON chargeback (team, day);

CREATE INDEX chargeback_owner_day ON chargeback (owner, day);

CREATE TABLE cluster_capacity (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    resource TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    pool TEXT NOT NULL,
    allocatable DOUBLE NOT NULL,
    requested DOUBLE NOT NULL,
    idle DOUBLE NOT NULL,
    unit_price DOUBLE NOT NULL,
    idle_cost DOUBLE NOT NULL,
    PRIMARY KEY (day, cluster, resource, gpu_model, pool)
);

CREATE TABLE waste (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    owner TEXT,
    idle_gpu_hours DOUBLE,
    unused_cpu_core_hours DOUBLE,
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
    held_hours DOUBLE NOT NULL,
    gpu_hours DOUBLE NOT NULL,
    cost DOUBLE NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);

UPDATE alembic_version SET version_num='0003' WHERE alembic_version.version_num = '0002';

-- Running upgrade 0003 -> 0004

CREATE TABLE budget_alerts (
    month DATE NOT NULL,
    team TEXT NOT NULL,
    threshold DOUBLE NOT NULL,
    day DATE NOT NULL,
    spent DOUBLE NOT NULL,
    budget DOUBLE NOT NULL,
    sent_at DATETIME NOT NULL,
    PRIMARY KEY (month, team, threshold)
);

CREATE TABLE closed_months (
    month DATE NOT NULL,
    closed_at DATETIME NOT NULL,
    closed_by TEXT NOT NULL,
    missing_days TEXT NOT NULL,
    PRIMARY KEY (month)
);

CREATE TABLE month_closings (
    month DATE NOT NULL,
    logged_at DATETIME NOT NULL,
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
    quantity DOUBLE,
    amount DOUBLE NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (month, line)
);

CREATE TABLE adjustments (
    month DATE NOT NULL,
    corrects DATE NOT NULL,
    team TEXT NOT NULL,
    cluster TEXT NOT NULL,
    resource TEXT NOT NULL,
    booked_at DATETIME NOT NULL,
    amount DOUBLE NOT NULL,
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
    quantity DOUBLE NOT NULL,
    cost DOUBLE NOT NULL,
    list_cost DOUBLE NOT NULL,
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
    idle_gpu_hours DOUBLE,
    unused_cpu_core_hours DOUBLE,
    PRIMARY KEY (day, cluster, namespace, team, workload)
);

UPDATE alembic_version SET version_num='0005' WHERE alembic_version.version_num = '0004';

-- Running upgrade 0005 -> 0006

CREATE TABLE deliveries (
    day DATE NOT NULL,
    message TEXT NOT NULL,
    address TEXT NOT NULL,
    claimed_at DATETIME NOT NULL,
    delivered_at DATETIME,
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
    billed_cost DOUBLE NOT NULL,
    currency TEXT NOT NULL,
    file_name TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    rows_read INTEGER NOT NULL,
    rows_matched INTEGER NOT NULL,
    imported_at DATETIME NOT NULL,
    imported_by TEXT NOT NULL,
    PRIMARY KEY (month, cluster)
);

UPDATE alembic_version SET version_num='0008' WHERE alembic_version.version_num = '0007';

-- Running upgrade 0008 -> 0009

CREATE TABLE invoice_files (
    month DATE NOT NULL,
    cluster TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    billed_cost DOUBLE NOT NULL,
    currency TEXT NOT NULL,
    file_name TEXT NOT NULL,
    rows_read INTEGER NOT NULL,
    rows_matched INTEGER NOT NULL,
    imported_at DATETIME NOT NULL,
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

CREATE TABLE _alembic_tmp_deliveries (
    day DATE NOT NULL,
    message TEXT NOT NULL,
    address TEXT NOT NULL,
    claimed_at DATETIME,
    delivered_at DATETIME,
    message_id TEXT,
    taken_over_at DATETIME,
    PRIMARY KEY (day, message)
);

INSERT INTO _alembic_tmp_deliveries (day, message, address, claimed_at, delivered_at) SELECT deliveries.day, deliveries.message, deliveries.address, deliveries.claimed_at, deliveries.delivered_at
FROM deliveries;

DROP TABLE deliveries;

ALTER TABLE _alembic_tmp_deliveries RENAME TO deliveries;

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
    quantity DOUBLE NOT NULL,
    unit_price DOUBLE NOT NULL,
    cost DOUBLE NOT NULL,
    list_cost DOUBLE NOT NULL,
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
    quantity DOUBLE NOT NULL,
    cost DOUBLE NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (day, cluster, namespace, team, resource, gpu_model)
);

UPDATE alembic_version SET version_num='0014' WHERE alembic_version.version_num = '0013';

-- Running upgrade 0014 -> 0015

ALTER TABLE bound_pending RENAME TO bound_pending_0013;

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
    quantity DOUBLE NOT NULL,
    unit_price DOUBLE NOT NULL,
    cost DOUBLE NOT NULL,
    list_cost DOUBLE NOT NULL,
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

ALTER TABLE statement_lines ADD COLUMN service_units DOUBLE;

UPDATE alembic_version SET version_num='0017' WHERE alembic_version.version_num = '0016';

-- Running upgrade 0017 -> 0018

CREATE TABLE journal_lines (
    month DATE NOT NULL,
    posting INTEGER NOT NULL,
    line INTEGER NOT NULL,
    kind TEXT NOT NULL,
    posted_at DATETIME NOT NULL,
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
    provisioned DOUBLE NOT NULL,
    claimed DOUBLE NOT NULL,
    unclaimed DOUBLE NOT NULL,
    unit_price DOUBLE,
    unclaimed_cost DOUBLE,
    PRIMARY KEY (day, cluster, storageclass)
);

UPDATE alembic_version SET version_num='0019' WHERE alembic_version.version_num = '0018';

-- Running upgrade 0019 -> 0020

ALTER TABLE waste ADD COLUMN unused_storage_gib_hours DOUBLE;

ALTER TABLE workload_waste ADD COLUMN unused_storage_gib_hours DOUBLE;

UPDATE alembic_version SET version_num='0020' WHERE alembic_version.version_num = '0019';

-- Running upgrade 0020 -> 0021

CREATE TABLE allocation_draws (
    account TEXT NOT NULL,
    starts DATE NOT NULL,
    day DATE NOT NULL,
    team TEXT NOT NULL,
    cluster TEXT NOT NULL,
    used DOUBLE NOT NULL,
    used_cost DOUBLE NOT NULL,
    drawn DOUBLE NOT NULL,
    drawn_cost DOUBLE NOT NULL,
    currency TEXT NOT NULL,
    PRIMARY KEY (account, starts, day, team, cluster)
);

CREATE TABLE allocation_alerts (
    account TEXT NOT NULL,
    starts DATE NOT NULL,
    threshold DOUBLE NOT NULL,
    day DATE NOT NULL,
    drawn DOUBLE NOT NULL,
    amount DOUBLE NOT NULL,
    sent_at DATETIME NOT NULL,
    PRIMARY KEY (account, starts, threshold)
);

UPDATE alembic_version SET version_num='0021' WHERE alembic_version.version_num = '0020';

-- Running upgrade 0021 -> 0022

CREATE TABLE energy (
    day DATE NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    team TEXT NOT NULL,
    gpu_kwh DOUBLE,
    cpu_kwh DOUBLE,
    carbon_g DOUBLE,
    PRIMARY KEY (day, cluster, namespace, team)
);

UPDATE alembic_version SET version_num='0022' WHERE alembic_version.version_num = '0021';

-- Running upgrade 0022 -> 0023

ALTER TABLE energy ADD COLUMN shared_kwh DOUBLE DEFAULT '0' NOT NULL;

ALTER TABLE energy ADD COLUMN shared_carbon_g DOUBLE DEFAULT '0';

UPDATE alembic_version SET version_num='0023' WHERE alembic_version.version_num = '0022';
