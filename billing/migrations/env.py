"""Alembic's entry point: run the migrations on the connection billing hands over."""

from alembic import context

from billing.ledger import metadata

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=metadata,  # so `alembic revision --autogenerate` can draft the next migration
    render_as_batch=True,  # SQLite alters tables by copying them
)
with context.begin_transaction():
    context.run_migrations()
