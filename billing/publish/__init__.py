"""Publishing: the ledger read back as day views, pages, reports, statements and FOCUS exports."""
