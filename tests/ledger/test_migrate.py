"""Schema migrations: a new database gets the schema, an old one is told to upgrade."""

from datetime import date
from pathlib import Path

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from click.testing import CliRunner
from sqlalchemy import Engine, create_engine, text

from billing.cli import main
from billing.ledger import migrate
from billing.ledger.allocations import allocation_draws_between
from billing.ledger.database import LedgerError, open_ledger
from billing.ledger.read import energy_sums, read_capacity, read_energy, read_rows, read_storage, read_waste
from billing.ledger.tables import metadata
from tests.helpers.old_names import upgrade_old_names
from tests.helpers.schemas import describe


def assert_the_model_s_schema(engine, tmp_path) -> None:
    """An upgraded ledger's schema is the one billing/ledger/tables.py describes."""
    schema = describe(engine)
    assert schema.pop("alembic_version")
    model = create_engine(f"sqlite:///{tmp_path}/model.db")
    metadata.create_all(model)
    assert schema == describe(model)


def upgraded_from(revision: str, statement: str, tmp_path, write_config) -> tuple[Engine, str]:
    """A ledger at `revision` holding what `statement` inserts, upgraded by `billing db upgrade`: the ledger and what
    the command said."""
    url = f"sqlite:///{tmp_path}/ledger.db"
    with create_engine(url).begin() as conn:
        command.upgrade(migrate._alembic(conn), revision)
        conn.execute(text(statement))
    result = CliRunner().invoke(main, ["db", "upgrade", "--config", str(write_config(database=url))])
    assert result.exit_code == 0, result.output
    return open_ledger(url), result.output


def test_a_new_database_gets_the_schema_of_the_model(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/new.db")
    assert_the_model_s_schema(engine, tmp_path)
    with engine.connect() as conn:
        assert migrate.current_revision(conn) == migrate.head_revision()


def test_each_migration_is_named_by_its_revision_and_follows_the_one_numbered_before():
    """head_revision takes the newest file's number without importing Alembic: Alembic's own chain must agree."""
    scripts = ScriptDirectory(str(migrate.MIGRATIONS))
    oldest_first = list(reversed(list(scripts.walk_revisions())))
    assert [Path(script.path).name.split("_")[0] for script in oldest_first] == [s.revision for s in oldest_first]
    assert [script.down_revision for script in oldest_first] == [None] + [s.revision for s in oldest_first[:-1]]
    assert migrate.head_revision() == scripts.get_current_head() == oldest_first[-1].revision


def test_an_older_schema_stops_the_run_until_db_upgrade(tmp_path, write_config):
    url = f"sqlite:///{tmp_path}/old.db"
    engine = open_ledger(url)
    with engine.begin() as conn:  # as if written by the release before migrations: tables, no revision
        conn.execute(text("DROP TABLE alembic_version"))
        conn.execute(text("DROP TABLE cluster_days"))
    with pytest.raises(LedgerError, match=r"schema revision none, this billing needs 0023: run `billing db upgrade`"):
        open_ledger(url)

    config = str(write_config(database=url))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 1 and "run `billing db upgrade` first" in result.output


def test_db_upgrade_on_an_empty_database_and_again(tmp_path, write_config):
    config = str(write_config(database=f"sqlite:///{tmp_path}/ledger.db"))
    first = CliRunner().invoke(main, ["db", "upgrade", "--config", config])
    assert first.exit_code == 0, first.output
    assert "from revision none to 0023" in first.output
    again = CliRunner().invoke(main, ["db", "upgrade", "--config", config])
    assert again.exit_code == 0 and "already at revision 0023" in again.output


def test_upgrading_a_ledger_of_revision_0001_keeps_its_rows_at_list_price(tmp_path, write_config):
    url = f"sqlite:///{tmp_path}/ledger.db"
    with create_engine(url).begin() as conn:  # the first release's schema, one row in it
        command.upgrade(migrate._alembic(conn), "0001")
        conn.execute(text("INSERT INTO chargeback VALUES ('2026-11-19', 'jaguar', 'alice', 'robotics', 'alice', "
                          "'cpu', '', 100.0, 0.012, 1.2, 'USD', '2026-11-20 01:00:00')"))
    result = CliRunner().invoke(main, ["db", "upgrade", "--config", str(write_config(database=url))])
    assert result.exit_code == 0 and "from revision 0001 to 0023" in result.output
    engine = open_ledger(url)
    rows = read_rows(engine, date(2026, 11, 19), date(2026, 11, 19))
    assert rows[["cost", "list_cost"]].values.tolist() == [[1.2, 1.2]]  # no discounts before 0002
    assert read_capacity(engine, date(2026, 11, 19)).empty
    assert_the_model_s_schema(engine, tmp_path)


def test_upgrading_to_0007_renames_the_part_no_workload_requested_and_unrequested_statement_lines(tmp_path, write_config):
    url = f"sqlite:///{tmp_path}/ledger.db"
    with create_engine(url).begin() as conn:
        command.upgrade(migrate._alembic(conn), "0006")
        for workload in ("(namespace)", "Deployment/web"):
            conn.execute(text("INSERT INTO workload_costs VALUES ('2026-11-19', 'jaguar', 'alice', 'robotics', 'alice', "
                              f"'{workload}', '{{}}', 'idle-cpu', '', 1.0, 0.012, 0.012, 'USD')"))
        for line, kind in enumerate(("charge", "idle")):
            conn.execute(text(f"INSERT INTO statement_lines VALUES ('2026-10-01', {line}, 'robotics', '', 'jaguar', "
                              f"'{kind}', 'cpu', '', NULL, 1.0, 0.012, 'USD')"))
    result = CliRunner().invoke(main, ["db", "upgrade", "--config", str(write_config(database=url))])
    assert result.exit_code == 0, result.output
    with open_ledger(url).connect() as conn:
        workloads = conn.execute(text("SELECT workload FROM workload_costs ORDER BY workload")).scalars().all()
        kinds = conn.execute(text("SELECT kind FROM statement_lines ORDER BY line")).scalars().all()
    assert workloads == ["(no workload)", "Deployment/web"] and kinds == ["charge", "unrequested"]


def test_upgrading_to_0009_keeps_each_invoice_as_the_months_first_file(tmp_path, write_config):
    url = f"sqlite:///{tmp_path}/ledger.db"
    with create_engine(url).begin() as conn:
        command.upgrade(migrate._alembic(conn), "0008")
        conn.execute(text("INSERT INTO invoices VALUES ('2026-10-01', 'ibis', 60.0, 'USD', 'october.csv', "
                          f"'{'ab' * 32}', 3, 2, '2026-11-03 09:00:00', 'finance')"))
    result = CliRunner().invoke(main, ["db", "upgrade", "--config", str(write_config(database=url))])
    assert result.exit_code == 0, result.output
    engine = open_ledger(url)
    with engine.connect() as conn:
        kept = conn.execute(text("SELECT month, cluster, sha256, billed_cost, file_name, imported_by FROM invoices")).all()
    assert [tuple(row) for row in kept] == [("2026-10-01", "ibis", "ab" * 32, 60.0, "october.csv", "finance")]
    assert_the_model_s_schema(engine, tmp_path)


def test_upgrading_to_0015_keeps_what_was_held_before_running_under_no_workload(tmp_path, write_config):
    engine, _ = upgraded_from("0014", "INSERT INTO bound_pending VALUES ('2026-11-19', 'jaguar', 'carol', 'nlp', "
                              "'carol', 'gpu', 'NVIDIA-H100-80GB-HBM3', 'ImagePullBackOff', 46.5, 2.4, 111.6, 111.6, "
                              "'USD', 0)", tmp_path, write_config)
    with engine.connect() as conn:
        kept = conn.execute(text("SELECT namespace, workload, reason, quantity, cost, charged FROM bound_pending")).all()
    assert [tuple(row) for row in kept] == [("carol", "", "ImagePullBackOff", 46.5, 111.6, 0)]
    assert_the_model_s_schema(engine, tmp_path)


def test_upgrading_to_0019_keeps_the_days_and_shows_no_storage_for_days_billed_before(tmp_path, write_config):
    """A day billed at revision 0018 has no storage per class: after the upgrade it reads none (its page shows no
    storage section) and keeps its rows; the schema is the model's."""
    engine, said = upgraded_from("0018", "INSERT INTO chargeback VALUES ('2026-11-19', 'jaguar', 'alice', 'robotics', "
                                 "'alice', 'storage', 'fast-nvme', 2100.0, 0.0005, 1.05, 'USD', '2026-11-20 01:00:00', "
                                 "1.05)", tmp_path, write_config)
    assert "from revision 0018 to 0023" in said
    assert read_storage(engine, date(2026, 11, 19)).empty
    assert read_rows(engine, date(2026, 11, 19), date(2026, 11, 19))["cost"].tolist() == [1.05]
    assert_the_model_s_schema(engine, tmp_path)


def test_upgrading_to_0020_keeps_the_waste_and_shows_unused_storage_unmeasured_before(tmp_path, write_config):
    """A day's waste written at revision 0019 keeps its measures; unused storage, never measured then, reads NaN."""
    engine, said = upgraded_from("0019", "INSERT INTO waste VALUES ('2026-11-19', 'jaguar', 'alice', 'robotics', "
                                 "'alice', 2.5, 7.0)", tmp_path, write_config)
    assert "from revision 0019 to 0023" in said
    kept = read_waste(engine, date(2026, 11, 19))
    assert kept[["idle_gpu_hours", "unused_cpu_core_hours"]].values.tolist() == [[2.5, 7.0]]
    assert kept["unused_storage_gib_hours"].isna().all()


def test_upgrading_to_0021_keeps_the_days_and_reads_no_allocation_drawn_before(tmp_path, write_config):
    """A night billed at revision 0020 drew no allocation: after the upgrade its rows are kept and no draw is read."""
    engine, said = upgraded_from("0020", "INSERT INTO chargeback VALUES ('2026-11-19', 'jaguar', 'alice', 'robotics', "
                                 "'alice', 'cpu', '', 100.0, 0.012, 1.2, 'USD', '2026-11-20 01:00:00', 1.2)",
                                 tmp_path, write_config)
    assert "from revision 0020 to 0023" in said
    assert allocation_draws_between(engine, date(2026, 11, 1), date(2026, 11, 30)).empty
    assert read_rows(engine, date(2026, 11, 19), date(2026, 11, 19))["cost"].tolist() == [1.2]


def test_upgrading_to_0022_keeps_the_days_and_reads_no_energy_for_days_billed_before(tmp_path, write_config):
    """A day billed at revision 0021 has no energy: after the upgrade it reads none and keeps its rows; the schema is
    the model's."""
    engine, said = upgraded_from("0021", "INSERT INTO chargeback VALUES ('2026-11-19', 'jaguar', 'alice', 'robotics', "
                                 "'alice', 'cpu', '', 100.0, 0.01, 1.0, 'USD', '2026-11-20 01:00:00', 1.0)", tmp_path,
                                 write_config)
    assert "from revision 0021 to 0023" in said
    assert read_energy(engine, date(2026, 11, 19), date(2026, 11, 19)).empty
    assert read_rows(engine, date(2026, 11, 19), date(2026, 11, 19))["cost"].tolist() == [1.0]
    assert_the_model_s_schema(engine, tmp_path)


def test_upgrading_to_0023_keeps_a_days_energy_with_nothing_shared(tmp_path, write_config):
    """A day billed at revision 0022 shared no unattributed energy: after the upgrade each row reads 0 shared, and a
    team's energy and carbon are what they were (4.6 kWh, 1,150 g)."""
    engine, said = upgraded_from("0022", "INSERT INTO energy VALUES ('2026-11-19', 'lynx', 'team-vision', 'vision', "
                                 "4.2, 0.4, 1150.0), ('2026-11-19', 'lynx', '', '', 0.7, 2.6, 825.0)", tmp_path,
                                 write_config)
    assert "from revision 0022 to 0023" in said
    kept = read_energy(engine, date(2026, 11, 19), date(2026, 11, 19))
    assert kept[["shared_kwh", "shared_carbon_g"]].values.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    sums = [(row["team"], row["shared_kwh"], row["kwh"], row["carbon_g"])
            for row in energy_sums(engine, date(2026, 11, 19), date(2026, 11, 19))]
    assert [team for team, *_ in sums] == ["", "vision"]
    assert [figures for _, *figures in sums] == [[0.0, pytest.approx(3.3), 825.0], [0.0, pytest.approx(4.6), 1150.0]]
    assert_the_model_s_schema(engine, tmp_path)


def test_a_ledger_written_with_the_old_names_upgrades_to_the_new(tmp_path):
    upgrade_old_names(f"sqlite:///{tmp_path}/ledger.db")
