"""billing.example.yaml and docs/configuration.md against the config models, so neither drifts from them.

Keys are dotted paths; `[]` marks a list of sections (`clusters[].prices.gpu_hour`). A key whose value is a
mapping of user-chosen names (`prices.gpu_models`) is one key: its entries are examples, not keys.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
import typing
from pathlib import Path

import yaml
from pydantic import BaseModel

import billing.config
from billing.config import Config, load_config
from billing.config.section import Section

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


def _mapped_sections(annotation: object) -> list[type[BaseModel]]:
    """The sections a mapping of user-chosen names holds as its values (`kueue.queues`: queue -> team, namespaces)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _mapped_sections(args[0])
    if origin in (typing.Union, types.UnionType):
        return [found for arg in args for found in _mapped_sections(arg)]
    return [section for section, _ in _sections(args[1])] if origin is dict else []


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


def mappings_of_sections(model: type[BaseModel] = Config, prefix: str = "") -> dict[str, type[BaseModel]]:
    """Each key whose value maps user-chosen names to a section (one key of the reference), with that section."""
    found = {}
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        for section in _mapped_sections(field.annotation):
            found[key] = section
        for section, is_list in _sections(field.annotation):
            found |= mappings_of_sections(section, key + ("[]." if is_list else "."))
    return found


def reached_sections(model: type[BaseModel] = Config) -> set[type[BaseModel]]:
    """The model and every section a key leads to, as a section, a list of them or a mapping's values."""
    found = {model}
    for field in model.model_fields.values():
        for section in [section for section, _ in _sections(field.annotation)] + _mapped_sections(field.annotation):
            found |= reached_sections(section)
    return found


def defined_sections() -> set[type[BaseModel]]:
    """Every section model the modules of billing/config/ define."""
    found = set()
    for module in pkgutil.iter_modules(billing.config.__path__, "billing.config."):
        for _, value in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if issubclass(value, Section) and value is not Section and value.__module__ == module.name:
                found.add(value)
    return found


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
    assert not missing, "keys of billing/config/ missing from billing.example.yaml: " + ", ".join(missing)

    monkeypatch.setenv("BILLING_LDAP_PASSWORD", "s3cret")
    monkeypatch.setenv("BILLING_SMTP_USER", "billing")
    monkeypatch.setenv("BILLING_SMTP_PASSWORD", "mail-s3cret")
    config = load_config(EXAMPLE)
    assert [c.name for c in config.clusters] == ["jaguar", "ibis"]
    assert config.clusters[0].reserved_pools.teams == {"robotics-h100": "robotics"}
    assert config.clusters[0].prices.priority_classes == {"backfill": 0.0}


def test_every_section_model_is_reached_from_the_top_level():
    """A section no key of Config leads to would be neither loadable nor checked against the reference below."""
    unreached = sorted(model.__qualname__ for model in defined_sections() - reached_sections())
    assert not unreached, "section models of billing/config/ that no key of Config leads to: " + ", ".join(unreached)
    assert {"PrometheusConfig", "DatedPrices", "KueueQueue", "PeopleConfig", "AuditConfig"} <= {
        model.__qualname__ for model in defined_sections()}


def documented_keys() -> set[str]:
    """The keys of the reference's tables: the first cell of each row, in backticks."""
    return set(re.findall(r"^\| `([^`]+)` \|", REFERENCE.read_text(), flags=re.MULTILINE))


def test_the_reference_documents_every_key_and_no_other():
    keys, documented = model_keys(), documented_keys()
    missing, stale = sorted(keys - documented), sorted(documented - keys)
    assert not missing, "keys of billing/config/ missing from docs/configuration.md: " + ", ".join(missing)
    assert not stale, "docs/configuration.md documents keys billing/config/ does not have: " + ", ".join(stale)


def test_a_mapping_of_sections_names_their_keys_in_its_row():
    """`clusters[].kueue.queues` is one key of the reference; the sections it maps to have keys of their own."""
    rows = dict(re.findall(r"^\| `([^`]+)` \|(.*)$", REFERENCE.read_text(), flags=re.MULTILINE))
    mappings = mappings_of_sections()
    assert "clusters[].kueue.queues" in mappings
    for key, section in mappings.items():
        unnamed = sorted(name for name in model_keys(section) if f"`{name}`" not in rows[key])
        assert not unnamed, f"docs/configuration.md's row of {key} does not name its entries' keys: " + ", ".join(unnamed)
