"""The invoice per account that `billing close` writes beside the journal (docs/spec.md "Accounts"): who issues it,
as the recharge center's letterhead says."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from billing.config.section import Section

Line = Annotated[str, Field(min_length=1)]


class AccountInvoicesConfig(Section):
    """The recharge center's name and address, and what it says at the foot of every invoice."""

    issuer: Line  # Research Computing, University of Example
    address: list[Line] = []  # its lines, in order
    contact: str = ""  # where a PI asks about an invoice: rc-billing@example.edu
    note: str = ""  # the foot of every invoice: how the charges are paid, e.g. by journal entry to the account
    paper: Literal["A4", "letter"] = "A4"  # the PDF's page size
