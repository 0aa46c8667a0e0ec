"""Charging: who pays for each namespace, at which prices, and the split below the namespace."""
