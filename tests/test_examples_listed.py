"""docs/examples.md lists every scenario in examples/ (and nothing that is not there), each with a docs page that
exists: the README points users there, so a new example nobody listed is an example nobody finds."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_example_is_listed_with_an_existing_page() -> None:
    page = (ROOT / "docs" / "examples.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`([^`]+\.yaml)`", row.split("|")[1])}
    on_disk = {str(p.relative_to(ROOT / "examples")) for p in (ROOT / "examples").rglob("*.yaml")
               if p.parent.name != "data"}
    assert on_disk - listed == set(), "examples not in docs/examples.md"
    assert listed - on_disk == set(), "docs/examples.md lists files that do not exist"
    for row in rows:
        for link in re.findall(r"\]\(([^)#]+)", row):
            assert (ROOT / "docs" / link).is_file(), link
