"""The ledger database: its tables, migrations, and the one transaction that replaces a day."""
