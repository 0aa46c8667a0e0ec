# Tasks for developers; each recipe is one command a newcomer can also type by hand.
.PHONY: help lint unit test schema demo-record lock
.DEFAULT_GOAL := help

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' Makefile | sed -E 's/:.*## /\t/'

lint:  ## ruff and mypy, as CI runs them (settings in pyproject.toml)
	ruff check . && mypy

unit:  ## the tests that need no server and run no command night after night; the slowest ten named
	python -m pytest --ignore=tests/integration -q --durations=10

test:  ## every test, the README's command (integration tests start real servers)
	python -m pytest

schema:  ## write sql/*.sql again from the migrations (a test keeps them equal)
	for dialect in sqlite postgresql; do python -m billing.ledger.schema_sql $$dialect > sql/$$dialect.sql; done

demo-record:  ## record the demo's Prometheus answers again (starts a real Prometheus)
	python -m fixtures.demo.record

lock:  ## write requirements.lock again after changing dependencies in pyproject.toml
	pip-compile --generate-hashes --no-emit-find-links --no-emit-index-url --output-file=requirements.lock --strip-extras pyproject.toml
