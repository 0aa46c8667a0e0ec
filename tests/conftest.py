"""Shared helpers for the unit tests: a small valid configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

MINIMAL_CONFIG = {
    "timezone": "UTC",
    "currency": "EUR",
    "step": "60s",
    "database": "sqlite:///billing.db",
    "clusters": [
        {
            "name": "jaguar",
            "prometheus": {"url": "http://127.0.0.1:9"},
            "prices": {
                "cpu_core_hour": 0.01,
                "memory_gib_hour": 0.002,
                "gpu_hour": 1.0,
                "gpu_models": {"NVIDIA-H100-80GB-HBM3": 2.5},
            },
        }
    ],
    "directory": {"ldif": "directory.ldif"},
}


@pytest.fixture
def write_config(tmp_path: Path):
    """Write MINIMAL_CONFIG with some keys replaced; return the file's path."""

    def write(**changes) -> Path:
        path = tmp_path / "billing.yaml"
        path.write_text(yaml.safe_dump({**MINIMAL_CONFIG, **changes}))
        return path

    return write
