"""Alembic's entry point: run the migrations on the connection billing hands over."""

from alembic import context

from billing.ledger.tables import metadata

offline = context.is_offline_mode()  # offline: write the SQL script of sql/ for one dialect, no database involved
context.configure(
    connection=None if offline else context.config.attributes["connection"],
    dialect_name=context.config.attributes["dialect"] if offline else None,
    literal_binds=offline,
    target_metadata=metadata,  # so `alembic revision --autogenerate` can draft the next migration
    render_as_batch=True,  # SQLite alters tables by copying them
)
with context.begin_transaction():
    context.run_migrations()
