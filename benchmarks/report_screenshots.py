"""Screenshots of report.html for docs/img/: three examples run fresh, each page opened in Debian's chromium.

    python benchmarks/report_screenshots.py [--out docs/img]

For each example: the top of the page (headline numbers, what to look at, the timeline) and its subsystem's
main panel. Needs /usr/bin/chromium and playwright (`make test` installs both).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from kubetwin.runner import run

ROOT = Path(__file__).resolve().parents[1]
# (example, the panel to show beside the timeline: a substring of its figure's title)
SHOTS = (("kueue-cohort-borrowing", "Kueue ClusterQueues"), ("spot-vs-on-demand", "Nodes per pool"),
         ("serving-llama3-epp", "Time to first token"))
WIDTH = 1100


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for example, panel in SHOTS:
            folder = Path(tmp) / example
            run([ROOT / "examples" / f"{example}.yaml"], out=folder)
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto((folder / "report.html").as_uri())
            page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
            top = page.evaluate("() => { const t = document.querySelector('section.timeline');"
                                " return t.getBoundingClientRect().bottom + window.scrollY + 8; }")
            page.screenshot(path=str(args.out / f"report-{example}.png"),
                            clip={"x": 0, "y": 0, "width": WIDTH, "height": min(top, 1400)})
            section = page.locator("section.panel", has=page.locator(f"text={panel}")).first
            section.screenshot(path=str(args.out / f"report-{example}-panel.png"))
            page.close()
            print(f"{example}: {args.out}/report-{example}.png, report-{example}-panel.png")
        browser.close()


if __name__ == "__main__":
    main()
