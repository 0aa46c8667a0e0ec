import os
import stat
from datetime import date

import pandas as pd
import pytest
from sqlalchemy import create_engine

import billing.ledger.write
from billing import frames
from billing.charge.bill import DayBill
from billing.ledger.database import LedgerError, open_ledger
from billing.ledger.read import completed, read_rows, read_workload_costs, read_workload_totals
from billing.ledger.tables import (
    bound_pending,
    chargeback,
    cluster_capacity,
    cluster_storage,
    gpu_holdings,
    metadata,
    waste,
    workload_costs,
    workload_waste,
)
from billing.ledger.write import replace_day
from tests.helpers.schemas import ddl_engine, describe

DAY = date(2026, 11, 20)


def priced(*rows) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=frames.ROWS.columns)


ROWS = priced(
    ("jaguar", "alice", "robotics", "alice", "gpu", "NVIDIA-H100-80GB-HBM3", 24.0, 2.4, 57.6, 57.6),
    ("jaguar", "kube-system", "platform", None, "cpu", "", 10.0, 0.012, 0.12, 0.12),
)


def test_sqlite_ddl_matches_the_model(tmp_path):
    from_ddl = describe(ddl_engine(f"sqlite:///{tmp_path}/ddl.db", "sqlite"))
    assert from_ddl.pop("alembic_version")
    from_model = create_engine(f"sqlite:///{tmp_path}/model.db")
    metadata.create_all(from_model)
    assert from_ddl == describe(from_model)


def test_a_ledger_made_from_the_ddl_is_at_the_current_revision(tmp_path):
    url = f"sqlite:///{tmp_path}/ddl.db"
    ddl_engine(url, "sqlite")
    assert replace_day(open_ledger(url), DAY, DayBill(ROWS), "USD") == 2


def test_replace_day_is_idempotent_and_records_the_day(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    assert replace_day(engine, DAY, DayBill(ROWS), "USD") == 2
    assert replace_day(engine, DAY, DayBill(ROWS), "USD") == 2
    rows = read_rows(engine, DAY, DAY)
    assert len(rows) == 2
    assert rows["cost"].sum() == pytest.approx(57.72)
    assert pd.isna(rows.loc[rows["namespace"] == "kube-system", "owner"].iloc[0])
    with engine.connect() as conn:  # stored as SQL NULL, not as the text 'nan' or 'None'
        assert conn.exec_driver_sql("select count(*) from chargeback where owner is null").scalar() == 1
    assert set(rows["currency"]) == {"USD"}
    assert completed(engine, DAY, date(2026, 11, 30)) == {DAY}


def test_replacing_a_day_removes_rows_that_are_gone_and_leaves_other_days(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    replace_day(engine, DAY, DayBill(ROWS), "USD")
    replace_day(engine, date(2026, 11, 21), DayBill(ROWS), "USD")
    replace_day(engine, DAY, DayBill(ROWS.iloc[:1]), "USD")
    assert len(read_rows(engine, DAY, DAY)) == 1
    assert len(read_rows(engine, date(2026, 11, 21), date(2026, 11, 21))) == 2
    assert len(read_rows(engine, DAY, date(2026, 11, 21), team="platform")) == 1


def test_a_failed_write_keeps_the_previous_rows(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    replace_day(engine, DAY, DayBill(ROWS), "USD")
    duplicate_key = pd.concat([ROWS, ROWS], ignore_index=True)
    with pytest.raises(LedgerError, match="writing 2026-11-20 failed, previous rows kept"):
        replace_day(engine, DAY, DayBill(duplicate_key), "USD")
    assert len(read_rows(engine, DAY, DAY)) == 2


def test_workload_rows_are_replaced_with_their_day(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    workloads = pd.DataFrame([
        ("jaguar", "alice", "robotics", "alice", "Deployment/train", '{"experiment": "x1"}', "gpu",
         "NVIDIA-H100-80GB-HBM3", 20.0, 48.0, 48.0),
        ("jaguar", "alice", "robotics", "alice", "Pod/debug", '{"experiment": ""}', "gpu",
         "NVIDIA-H100-80GB-HBM3", 4.0, 9.6, 9.6),
    ], columns=frames.WORKLOAD_COSTS.columns)
    replace_day(engine, DAY, DayBill(ROWS, workloads=workloads), "USD")
    replace_day(engine, DAY, DayBill(ROWS, workloads=workloads.iloc[:1]), "USD")
    stored = read_workload_costs(engine, DAY, DAY, team="robotics")
    assert stored[["workload", "quantity", "cost"]].values.tolist() == [["Deployment/train", 20.0, 48.0]]
    assert list(stored["day"]) == [DAY] and list(stored["currency"]) == ["USD"]
    assert read_workload_costs(engine, DAY, DAY, team="platform").empty


def test_workload_rows_are_written_in_batches_and_ranked_by_their_totals(tmp_path, monkeypatch):
    monkeypatch.setattr(billing.ledger.write, "INSERT_BATCH", 2)  # five rows: batches of 2, 2 and 1
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    workloads = pd.DataFrame([
        ("jaguar", "alice", "robotics", "alice", "Deployment/train", '{"experiment": "x1"}', "gpu", "H100", 20.0, 48.0, 48.0),
        ("jaguar", "alice", "robotics", "alice", "Deployment/train", '{"experiment": "x2"}', "gpu", "H100", 1.0, 2.4, 2.4),
        ("jaguar", "alice", "robotics", "alice", "Deployment/train", '{"experiment": "x1"}', "cpu", "", 10.0, 0.5, 0.5),
        ("jaguar", "alice", "robotics", "alice", "Pod/debug", '{"experiment": ""}', "gpu", "H100", 4.0, 9.6, 9.6),
        ("jaguar", "kube-system", "platform", None, "Pod/dns", '{"experiment": ""}', "cpu", "", 8.0, 0.25, 0.25),
    ], columns=frames.WORKLOAD_COSTS.columns)
    replace_day(engine, DAY, DayBill(ROWS, workloads=workloads), "USD")
    assert len(read_workload_costs(engine, DAY, DAY)) == 5
    totals = read_workload_totals(engine, DAY, DAY).sort_values("workload").fillna({"owner": "(none)"})
    assert totals.values.tolist() == [
        [DAY, "jaguar", "alice", "robotics", "alice", "Deployment/train", pytest.approx(48.0 + 2.4 + 0.5)],
        [DAY, "jaguar", "alice", "robotics", "alice", "Pod/debug", 9.6],
        [DAY, "jaguar", "kube-system", "platform", "(none)", "Pod/dns", 0.25],
    ]


def test_an_empty_day_is_completed_with_no_rows(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    assert replace_day(engine, DAY, DayBill(ROWS.iloc[:0]), "USD") == 0
    assert completed(engine, DAY, DAY) == {DAY}


def test_unreachable_database_is_one_sentence(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(LedgerError, match="cannot create its directory"):
        open_ledger(f"sqlite:///{tmp_path}/a-file/ledger.db")
    (tmp_path / "a-directory.db").mkdir()
    with pytest.raises(LedgerError, match="unreachable"):
        open_ledger(f"sqlite:///{tmp_path}/a-directory.db")
    assert open_ledger(f"sqlite:///{tmp_path}/new/dir/ledger.db")  # SQLite's directory is made, like output_dir
    with pytest.raises(LedgerError, match="config key database"):
        open_ledger("nosuchdialect://x")


def test_password_is_hidden_in_errors():
    with pytest.raises(LedgerError) as error:
        open_ledger("postgresql+psycopg://billing:hunter2@127.0.0.1:1/billing?connect_timeout=2")
    assert "hunter2" not in str(error.value)
    assert "127.0.0.1:1" in str(error.value)


def test_primary_key_is_the_specs():
    assert [c.name for c in chargeback.primary_key] == ["day", "cluster", "namespace", "team", "resource", "gpu_model"]


def test_a_new_sqlite_ledger_and_its_directories_are_private_under_umask_022(tmp_path):
    """It keeps a snapshot of the directory: names and email addresses of everyone."""
    previous = os.umask(0o022)
    try:
        engine = open_ledger(f"sqlite:///{tmp_path}/var/billing/ledger.db")
        replace_day(engine, DAY, DayBill(ROWS), "USD")
    finally:
        os.umask(previous)
    modes = {p: stat.S_IMODE((tmp_path / p).stat().st_mode) for p in ("var", "var/billing", "var/billing/ledger.db")}
    assert modes == {"var": 0o700, "var/billing": 0o700, "var/billing/ledger.db": 0o600}
    assert len(read_rows(engine, DAY, DAY)) == 2


def test_workload_rows_older_than_keep_days_go_in_the_same_transaction(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    workloads = pd.DataFrame([("jaguar", "alice", "robotics", "alice", "Pod/debug", "{}", "cpu", "", 1.0, 0.5, 0.5)],
                             columns=frames.WORKLOAD_COSTS.columns)
    older, newer = date(2026, 11, 1), date(2026, 11, 10)
    replace_day(engine, older, DayBill(ROWS, workloads=workloads), "USD")
    replace_day(engine, DAY, DayBill(ROWS, workloads=workloads), "USD", workloads_since=newer)
    assert read_workload_costs(engine, older, DAY)["day"].tolist() == [DAY]
    replace_day(engine, date(2026, 11, 5), DayBill(ROWS, workloads=workloads), "USD", workloads_since=newer)  # a backfill
    assert read_workload_costs(engine, older, DAY)["day"].tolist() == [DAY]  # not kept: nothing written
    assert len(read_rows(engine, older, DAY)) == 3 * len(ROWS)  # the namespace ledger is kept regardless


@pytest.mark.parametrize("table, schema, not_in_frame", [
    (chargeback, frames.ROWS, ("day", "currency", "computed_at")),
    (cluster_capacity, frames.CAPACITY, ("day",)),
    (cluster_storage, frames.STORAGE_CAPACITY, ("day",)),
    (waste, frames.CHARGED_WASTE, ("day",)),
    (gpu_holdings, frames.HOLDINGS, ("day", "currency")),
    (bound_pending, frames.BOUND_PENDING_COSTS, ("day", "currency")),
    (workload_costs, frames.WORKLOAD_COSTS, ("day", "currency")),
    (workload_waste, frames.CHARGED_WORKLOAD_WASTE, ("day",)),
])
def test_each_frame_charging_hands_the_ledger_is_its_table(table, schema, not_in_frame):
    """A DayBill's frames (billing/frames.py) are what the tables store, less the day and what the ledger adds."""
    assert sorted(c.name for c in table.columns if c.name not in not_in_frame) == sorted(schema.columns)
