"""Headless Chromium: screenshots of pages, and checks that they are not blank."""

from __future__ import annotations

import html
import json
import re
import subprocess

import pytest
from PIL import Image

from fixtures.servers import require_program

FLAGS = [  # headless as root needs these; the rest keep Chromium from reaching out
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
]


@pytest.fixture(scope="module")
def chromium():
    return require_program("chromium")  # Debian package chromium; skipped if missing, except in CI


def screenshot(chromium: str, page, png, width: int, height: int, profile) -> list[str]:
    """Open the page (a file or a URL), write a screenshot, return the page's console messages."""
    run = subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={width},{height}",
         page if isinstance(page, str) else page.as_uri()],
        capture_output=True, text=True, timeout=60,
    )
    assert png.exists(), run.stderr[-2000:]
    return [line for line in run.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


def assert_not_blank(png):
    """Text, rules and bars leave many colours and a fair share of non-white pixels."""
    image = Image.open(png).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    inked = sum(count for count, rgb in colours if sum(rgb) < 3 * 235)
    assert len(colours) > 50, f"{png.name}: only {len(colours)} colours"
    assert inked / (image.width * image.height) > 0.01, f"{png.name}: almost all white"


# Measures a page inside iframes of each width (a window narrower than 500 px is not honoured by headless Chromium,
# an iframe is): elements that end right of the viewport outside a box that scrolls sideways, each box that needs
# to scroll, and where each breakdown table's last (cost) cell ends.
_MEASURE = r"""<script>
function measure(doc, width) {
  const out = {overflow: [], scrolls: [], cost: [], overlaps: [], split: []};
  for (const el of doc.body.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.right <= width + 1) continue;
    let inside = false;
    for (let p = el.parentElement; p && p !== doc.body; p = p.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(doc.defaultView.getComputedStyle(p).overflowX)) { inside = true; break; }
    }
    const widerChild = [...el.children].some(c => c.getBoundingClientRect().right > width + 1);
    if (!inside && !widerChild) out.overflow.push(el.tagName + ' ' + (el.textContent || '').trim().slice(0, 60));
  }
  for (const el of doc.querySelectorAll('.scroll')) {
    if (el.scrollWidth > el.clientWidth + 1) out.scrolls.push((el.querySelector('table') || {}).id || '?');
  }
  // cells of one row whose boxes overlap (a sticky column pinned over another), and cells whose text ends outside
  // their box (a figure run into its neighbour)
  for (const row of doc.querySelectorAll('tr')) {
    const cells = [...row.children].filter(c => c.getBoundingClientRect().width > 0);
    for (let i = 0; i < cells.length; i++) {
      const a = cells[i].getBoundingClientRect();
      for (const other of cells.slice(i + 1)) {
        const b = other.getBoundingClientRect();
        if (Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1) {
          out.overlaps.push(cells[i].textContent.trim().slice(0, 30) + ' | ' + other.textContent.trim().slice(0, 30));
        }
      }
      const range = doc.createRange(); range.selectNodeContents(cells[i]);
      const text = range.getBoundingClientRect();
      if (text.width > 0 && (text.left < a.left - 1 || text.right > a.right + 1)) out.overlaps.push('past its cell: ' + cells[i].textContent.trim().slice(0, 30));
    }
  }
  // words (runs of letters, digits and the . , of figures; dates; units) that a line break splits: "Exampl|e",
  // "1,79|4.95", "2026-10-|20", "GPU-|h"; a name may break after a hyphen ("team-|robotics", "NVIDIA-H100-|80GB")
  const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const word of node.data.matchAll(/\d{4}-\d\d-\d\d|\p{L}+-h\b|[\p{L}\p{N}][\p{L}\p{N}.,_]*/gu)) {
      const range = doc.createRange(); range.setStart(node, word.index); range.setEnd(node, word.index + word[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) out.split.push(word[0] + ' in ' + node.parentElement.tagName + ' ' + node.data.trim().slice(0, 40));
    }
  }
  for (const table of doc.querySelectorAll('table.breakdown')) {
    const cell = table.querySelector('tbody tr td:last-child');
    if (cell) out.cost.push([table.id, cell.getBoundingClientRect().right]);
  }
  return out;
}
window.addEventListener('load', () => {
  const found = {};
  for (const frame of document.querySelectorAll('iframe')) {
    found[frame.width] = measure(frame.contentDocument, parseInt(frame.width));
  }
  const pre = document.createElement('pre'); pre.id = 'measured'; pre.textContent = JSON.stringify(found);
  document.body.appendChild(pre);
});
</script>"""


def layout(chromium: str, page, widths: tuple[int, ...], profile) -> dict[int, dict]:
    """Per width: {"overflow": [elements past the viewport's right edge, outside boxes that scroll], "scrolls":
    [ids of tables whose box must scroll], "cost": [[breakdown table id, right edge of its first cost cell]],
    "overlaps": [cells of a row that overlap, cells whose text runs out of them], "split": [words a line break
    splits]}."""
    harness = page.with_name(f"{page.stem}-layout.html")
    frames = "".join(f'<iframe src="{page.as_uri()}" width="{w}" height="2000"></iframe>' for w in widths)
    harness.write_text(f"<!DOCTYPE html><html><body>{_MEASURE}{frames}</body></html>")
    run = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--allow-file-access-from-files",
                          "--virtual-time-budget=5000", f"--window-size={sum(widths) + 100},2200", "--dump-dom",
                          harness.as_uri()], capture_output=True, text=True, timeout=90)
    found = re.search(r'<pre id="measured">(.*?)</pre>', run.stdout, re.S)
    assert found, run.stderr[-2000:]
    return {int(width): measured for width, measured in json.loads(html.unescape(found.group(1))).items()}
