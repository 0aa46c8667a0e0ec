"""GPU/CPU chargeback for shared Kubernetes clusters."""
