"""billing.example.yaml and docs/configuration.md against the config model, so neither drifts from it.

Keys are dotted paths; `[]` marks a list of sections (`clusters[].prices.gpu_hour`). A key whose value is a
mapping of user-chosen names (`prices.gpu_models`) is one key: its entries are examples, not keys.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import yaml
from pydantic import BaseModel

from billing.config import Config, load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "billing.example.yaml"
REFERENCE = ROOT / "docs" / "configuration.md"


def _sections(annotation: object) -> list[tuple[type[BaseModel], bool]]:
    """The config sections an annotation holds, each with whether it is a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, False)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _sections(args[0])
    if origin is list:
        return [(section, True) for section, _ in _sections(args[0])]
    if origin in (typing.Union, types.UnionType):
        return [found for arg in args for found in _sections(arg)]
    return []


def model_keys(model: type[BaseModel] = Config, prefix: str = "") -> set[str]:
    """Every key a config file may set (resolved secrets, which the file never sets, left out)."""
    keys = set()
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        key = prefix + (field.alias or name)
        sections = _sections(field.annotation)
        for section, is_list in sections:
            found = model_keys(section, key + ("[]." if is_list else "."))
            # a form of the same section with more keys (dated price sets) is documented by those keys only
            forms = [other for other, _ in sections if other is not section and issubclass(section, other)]
            own = {field.alias or name for name, field in section.model_fields.items()
                   if not any(name in other.model_fields for other in forms)}
            keys |= {k for k in found if not forms or k.rsplit(".", 1)[-1] in own}
        if not sections:
            keys.add(key)
    return keys


def file_keys(value: object, model_keys: set[str], prefix: str = "") -> set[str]:
    """The dotted keys a loaded YAML document sets, descending only into what the model calls sections."""
    if isinstance(value, list) and any(k.startswith(prefix + "[].") for k in model_keys):
        return {key for item in value for key in file_keys(item, model_keys, prefix + "[]")}
    if isinstance(value, dict) and (prefix == "" or prefix not in model_keys):
        return {key for name, item in value.items()
                for key in file_keys(item, model_keys, f"{prefix}.{name}" if prefix else name)}
    return {prefix}


def test_the_walk_finds_sections_lists_and_aliases():
    keys = model_keys()
    assert {"timezone", "clusters[].name", "clusters[].prices.gpu_models", "clusters[].reserved_pools.teams",
            "directory.people.uid_attribute", "email.from"} <= keys
    assert not {"email.from_", "clusters[].prometheus.bearer_token", "directory.bind_password", "clusters"} & keys


def test_the_example_sets_every_key_and_loads(monkeypatch, tmp_path):
    keys = model_keys()
    missing = sorted(keys - file_keys(yaml.safe_load(EXAMPLE.read_text()), keys))
    assert not missing, "keys of billing/config.py missing from billing.example.yaml: " + ", ".join(missing)

    monkeypatch.setenv("BILLING_LDAP_PASSWORD", "s3cret")
    monkeypatch.setenv("BILLING_SMTP_USER", "billing")
    monkeypatch.setenv("BILLING_SMTP_PASSWORD", "mail-s3cret")
    config = load_config(EXAMPLE)
    assert [c.name for c in config.clusters] == ["jaguar", "ibis"]
    assert config.clusters[0].reserved_pools.teams == {"robotics-h100": "robotics"}
    assert config.clusters[0].prices.priority_classes == {"backfill": 0.0}


def documented_keys() -> set[str]:
    """The keys of the reference's tables: the first cell of each row, in backticks."""
    return set(re.findall(r"^\| `([^`]+)` \|", REFERENCE.read_text(), flags=re.MULTILINE))


def test_the_reference_documents_every_key_and_no_other():
    keys, documented = model_keys(), documented_keys()
    missing, stale = sorted(keys - documented), sorted(documented - keys)
    assert not missing, "keys of billing/config.py missing from docs/configuration.md: " + ", ".join(missing)
    assert not stale, "docs/configuration.md documents keys billing/config.py does not have: " + ", ".join(stale)
