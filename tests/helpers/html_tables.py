"""Read the cells of a table out of a rendered page, as a person would see them."""

from __future__ import annotations

from html.parser import HTMLParser


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.texts: dict[str, str] = {}  # text of any element with an id
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._ids: list[tuple[str, str, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self._ids.append((tag, attrs["id"], []))
        if tag == "table" and "id" in attrs:
            self._table = attrs["id"]
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None
        if self._ids and self._ids[-1][0] == tag:
            _, element_id, text = self._ids.pop()
            self.texts[element_id] = " ".join("".join(text).split())

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        for _, _, text in self._ids:
            text.append(data)


def read_page(html: str) -> _Tables:
    """`.tables[id]`: rows of cell texts (header row first); `.texts[id]`: text of an element."""
    parser = _Tables()
    parser.feed(html)
    return parser
