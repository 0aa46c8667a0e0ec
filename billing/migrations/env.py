"""Alembic's entry point: run the migrations on the connection billing hands over."""

from alembic import context

from billing.ledger import metadata

common = {
    "target_metadata": metadata,  # so `alembic revision --autogenerate` can draft the next migration
    "render_as_batch": True,  # SQLite alters tables by copying them
}
if context.is_offline_mode():  # the SQL script of sql/ for one dialect, no database involved
    context.configure(dialect_name=context.config.attributes["dialect"], literal_binds=True, **common)
else:
    context.configure(connection=context.config.attributes["connection"], **common)
with context.begin_transaction():
    context.run_migrations()
