"""The HTML report in a real headless browser (Debian's chromium): it loads without errors, every figure
decodes, and the page uses the window's full width with figures side by side.

The report holds no script of its own; the test injects a small one at the top of <head> that records
every error event (script errors, and resources that fail to load) and, on load, writes what it saw
into the DOM, which ``chromium --dump-dom`` prints. .ci/run installs chromium; without it these tests
skip and say so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from test_analysis_compare import incast_pair

from cosim import results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: apt-get install -y chromium "
                                "(.ci/run does when it may use apt)")

WINDOW_PX = (1600, 1000)

#: records errors from the first moment, and on load writes a JSON verdict into <pre id="cosim-check">
CHECK_SCRIPT = """<script>
window.__errors = [];
addEventListener("error", e => __errors.push(e.message || ("failed to load " + (e.target.tagName || "?"))), true);
addEventListener("unhandledrejection", e => __errors.push("unhandled rejection: " + e.reason));
addEventListener("load", () => {
  const box = el => el ? Math.round(el.getBoundingClientRect().width) : 0;
  const images = [...document.images].map(i => ({alt: i.alt, complete: i.complete, natural_width: i.naturalWidth,
    natural_height: i.naturalHeight, shown_width: box(i), top: Math.round(i.getBoundingClientRect().top)}));
  const out = document.createElement("pre");
  out.id = "cosim-check";
  out.textContent = JSON.stringify({errors: __errors, images, viewport_width: innerWidth,
    figures_width: box(document.querySelector(".figures")), page_width: document.documentElement.scrollWidth});
  document.body.appendChild(out);
});
</script>"""


def browser_check(page_path, tmp_path) -> dict:
    """Open ``page_path`` with the check script injected in headless chromium; the verdict it wrote."""
    page = page_path.read_text(encoding="utf-8")
    checked = tmp_path / f"checked-{page_path.name}"
    checked.write_text(page.replace("<head>", "<head>" + CHECK_SCRIPT, 1), encoding="utf-8")
    out = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WINDOW_PX[0]},{WINDOW_PX[1]}",
                          "--virtual-time-budget=10000", "--dump-dom", checked.as_uri()],
                         capture_output=True, text=True, timeout=60)
    found = re.search(r'<pre id="cosim-check">(.*?)</pre>', out.stdout, re.S)
    assert found, f"no verdict in the dumped DOM (exit {out.returncode}): {out.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))


@pytest.fixture(scope="module")
def report_page(engine_ns, tmp_path_factory):
    """The report of two incast runs (DCQCN, and PFC only with pauses): CDFs, queues, heatmaps, pauses."""
    d = tmp_path_factory.mktemp("browser")
    path = results.write_results(d / "pair.h5", list(incast_pair()))
    from cosim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["report", str(path), "-o", str(d / "report.html"), "-q"])
    assert exc.value.code == 0
    return d / "report.html"


@pytest.fixture(scope="module")
def verdict(report_page, tmp_path_factory):
    """What the browser saw of the report (one chromium start for the tests that only look)."""
    return browser_check(report_page, tmp_path_factory.mktemp("chromium"))


def test_report_loads_without_errors_and_every_figure_decodes(report_page, verdict):
    """No error event while loading; every <img> complete with its PNG decoded at the figure's size."""
    assert verdict["errors"] == []
    images = verdict["images"]
    assert len(images) == len(re.findall(r"<img ", report_page.read_text()))
    assert len(images) >= 7
    for img in images:
        assert img["complete"] and img["natural_width"] > 0 and img["natural_height"] > 0, img
        assert img["natural_width"] == 800 and img["natural_height"] == 450, img  # plots.FIGSIZE_IN × DPI


def test_report_uses_the_full_window_width(verdict):
    """The figure grid spans the window (not a fixed column), puts two figures side by side at 1600 px,
    and nothing makes the page itself scroll sideways (wide tables scroll inside their box)."""
    assert verdict["figures_width"] >= 0.9 * verdict["viewport_width"]
    assert verdict["page_width"] <= verdict["viewport_width"]
    first, second = verdict["images"][:2]
    assert first["top"] == second["top"] and first["shown_width"] + second["shown_width"] <= verdict["figures_width"]


def test_the_check_catches_a_broken_figure(report_page, tmp_path):
    """The harness is not blind: a figure that does not decode and a script error are both reported."""
    broken = tmp_path / "broken.html"
    page = report_page.read_text()
    page = page.replace('src="data:image/png;base64,', 'src="data:image/png;base64,AAAA', 1)
    broken.write_text(page.replace("</body>", "<script>undefined_function();</script></body>"), encoding="utf-8")
    verdict = browser_check(broken, tmp_path)
    assert any("undefined_function" in e for e in verdict["errors"])
    assert any("failed to load IMG" in e for e in verdict["errors"])
    assert verdict["images"][0]["natural_width"] == 0
