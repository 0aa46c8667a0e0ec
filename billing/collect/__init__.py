"""Collection: what each pod requested and held, read from the metrics store (Prometheus, VictoriaMetrics)."""
