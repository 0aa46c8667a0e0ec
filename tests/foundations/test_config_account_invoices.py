"""The account_invoices section of the config file (billing/config/account_invoices.py): the recharge center's
letterhead on the invoices per account, and each mistake named with its key."""

from __future__ import annotations

import pytest

from billing.config import ConfigError, load_config
from tests.foundations.test_config_accounts import WORKED, accounts

LETTERHEAD = {"issuer": "Research Computing, University of Example", "address": ["4 Campus Drive", "Ann Arbor, MI"],
              "contact": "rc-billing@example.edu", "paper": "letter"}


def refusal(write_config, **sections) -> str:
    with pytest.raises(ConfigError) as refused:
        load_config(write_config(**sections))
    assert refused.value.exit_status == 2
    return str(refused.value).split(": ", 1)[1]


def test_the_letterhead_loads_beside_the_accounts(write_config):
    section = load_config(write_config(accounts=accounts(*WORKED), account_invoices=LETTERHEAD)).account_invoices
    assert section is not None
    assert (section.issuer, section.address, section.contact, section.note, section.paper) == (
        "Research Computing, University of Example", ["4 Campus Drive", "Ann Arbor, MI"], "rc-billing@example.edu",
        "", "letter")
    assert load_config(write_config(accounts=accounts(*WORKED))).account_invoices is None  # none: no invoices


def test_invoices_without_accounts_are_refused(write_config):
    assert refusal(write_config, account_invoices=LETTERHEAD) == (
        "(top level): account_invoices needs an accounts section: the invoices are per account; add accounts, or leave "
        "account_invoices out")


@pytest.mark.parametrize(("keys", "message"), [
    ({"issuer": ""}, "account_invoices.issuer: String should have at least 1 character"),
    ({"paper": "A5"}, "account_invoices.paper: Input should be 'A4' or 'letter'"),
    ({"adress": ["4 Campus Drive"]}, "account_invoices.adress: unknown key"),
])
def test_a_mistaken_key_is_named(write_config, keys, message):
    assert refusal(write_config, accounts=accounts(*WORKED), account_invoices={**LETTERHEAD, **keys}).startswith(
        message)
