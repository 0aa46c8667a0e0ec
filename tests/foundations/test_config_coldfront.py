"""The coldfront section of the config file (billing/config/coldfront.py): each mistake named with its key."""

from __future__ import annotations

import pytest

from billing.config import ConfigError, load_config
from tests.foundations.test_config_accounts import accounts

COLDFRONT = {"url": "https://coldfront.example.org", "token_env": "COLDFRONT_TOKEN",
             "namespace_attribute": "Kubernetes namespace", "account_attribute": "Account"}


def refusal(write_config, **sections) -> str:
    with pytest.raises(ConfigError) as refused:
        load_config(write_config(**sections))
    assert refused.value.exit_status == 2
    return str(refused.value)


def test_defaults_count_active_allocations_and_write_nothing_back(write_config):
    section = load_config(write_config(accounts=accounts(), coldfront=COLDFRONT)).coldfront
    assert section is not None
    assert (section.statuses, section.usage_attribute, section.usage_command, section.timeout) == (
        ["Active", "Renewal Requested"], "", ["coldfront"], 30.0)


def test_a_coldfront_without_accounts_or_without_a_subject_attribute_is_refused(write_config):
    assert "coldfront: needs an accounts section, whose names hold the accounts it names" in refusal(
        write_config, coldfront=COLDFRONT)
    assert "directory.teams.accounts_attribute: needs an accounts section" in refusal(
        write_config, directory={"ldif": "directory.ldif", "teams": {"accounts_attribute": "departmentNumber"}})
    assert ("coldfront: set namespace_attribute or team_attribute (or both): the allocation attribute naming what an "
            "allocation pays for") in refusal(write_config, accounts=accounts(),
                                              coldfront={**COLDFRONT, "namespace_attribute": ""})
    assert "coldfront.url" in refusal(write_config, accounts=accounts(), coldfront={**COLDFRONT, "url": "coldfront"})
