"""`billing serve`: the ledger read-only over HTTP, each person seeing only what they may."""
