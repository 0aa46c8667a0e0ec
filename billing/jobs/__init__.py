"""Jobs: run, backfill and check, the only places that know the order of the stages."""
