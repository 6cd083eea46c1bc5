"""What cosim report and cosim inspect say about a run: the resolved experiment of training and flow runs
alike, numbers rounded as in the tables, and figures that need matplotlib failing in one line without it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import help_output_loading_nothing_heavy, run_main
from test_analysis_plots import rail_training_run

from cosim import results


@pytest.fixture(scope="module")
def mixed_file(engine_ns, tmp_path_factory):
    """A training run (llama2 TP2 PP2 DP2 on rail-optimized RoCE) and a flow run (IB incast) in one file."""
    from cosim.run import run as run_experiment
    from cosim.spec import make

    flows = run_experiment(make("flows", name="incast", hosts=4, flow_bytes=64_000, transport="ib"))
    return results.write_results(tmp_path_factory.mktemp("report") / "mixed.h5", [rail_training_run(), flows])


def _text(page: str) -> str:
    """The page without its embedded images (base64 is not prose)."""
    return re.sub(r'src="data:[^"]*"', 'src=""', page)


def test_report_shows_what_ran_for_training_and_flow_runs(mixed_file, tmp_path, capsys):
    """The report of a training run lists its experiment (trace, parallelism, fabric as built) and every
    resolved field, as it does for a flow run; numbers are rounded; the page uses the full window width."""
    target = tmp_path / "r.html"
    code, _, err = run_main(["report", str(mixed_file), "-o", str(target)], capsys)
    assert code == 0 and not err
    page = _text(target.read_text())
    assert "No experiment stored" not in page and "No scenario" not in page
    what_ran = page[page.index("<h2>What ran</h2>"):page.index("<h2>Summary</h2>")]
    for needle in ("training", "flows", "TP2 PP2 DP2", "llama2-7b", "rail-optimized", "single-switch",
                   "RoCE, PFC, DCQCN on", "InfiniBand", "8 NICs on 4 servers", "2 rail + 2 spine",
                   "100 Gbps host, 200 Gbps fabric", "incast of 64000 B flows"):
        assert needle in what_ran, needle
    experiments = page[page.index("<h2>Experiments</h2>"):page.index("<h2>Provenance</h2>")]
    for field in ("workload.trace", "workload.iterations", "workload.flow_bytes", "network.topology",
                  "network.link_gbps", "telemetry.queue_sample_interval_ns"):
        assert f">{field}</td>" in experiments, field
    ours = what_ran + page[page.index("<h2>Experiments</h2>"):]  # the summary table is cosim compare's
    decimals = [m for c in re.findall(r"<td[^>]*>([^<]*)</td>", ours)
                if (m := re.fullmatch(r"[+-]?(\d+\.\d+)(e[+-]\d+)?", c))]
    significant = lambda m: len(m.group(1).replace(".", "").lstrip("0"))  # noqa: E731
    assert decimals and not [m.group(0) for m in decimals if significant(m) > 4]
    assert ">1000</td>" in experiments and ">1000.0</td>" not in experiments  # 1000.0 ns shown as 1000
    assert "max-width: 1100px" not in page and ".figures { display: grid" in page


def test_inspect_shows_the_experiment_above_the_summary(mixed_file, capsys):
    """cosim inspect prints what each run was (topology, transport, hosts, link rate, workload) first."""
    code, out, err = run_main(["inspect", str(mixed_file)], capsys)
    assert code == 0 and not err
    head, _, summary = out.partition("\nmetric ")
    assert summary and "iteration time" not in head
    for needle in ("experiment", "train", "incast", "rail-optimized", "single-switch", "InfiniBand",
                   "8 NICs on 4 servers", "4 NICs", "100 Gbps host", "TP2 PP2 DP2", "iterations", "seed"):
        assert needle in head, needle


def test_help_does_not_load_matplotlib():
    """plot, report and inspect --help stay instant: matplotlib is imported only to draw."""
    text = help_output_loading_nothing_heavy([["plot"], ["report"], ["inspect"]],
                                             heavy=("cppyy", "numpy", "h5py", "matplotlib"))
    assert "peak per bin" in text or "heatmap" in text


@pytest.mark.parametrize("verb", ["plot", "report"])
def test_without_matplotlib_figures_fail_in_one_line(mixed_file, tmp_path, verb):
    """With matplotlib not importable, cosim plot/report exit 2 with one line naming the pip command and
    write nothing."""
    target = tmp_path / ("figs" if verb == "plot" else "r.html")
    code = ("import sys; sys.modules['matplotlib'] = None\n"  # makes every 'import matplotlib' fail
            "from cosim.cli import main\n"
            f"main([{verb!r}, {str(mixed_file)!r}, '-o', {str(target)!r}])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: matplotlib") and "pip install matplotlib" in lines[0]
    assert not target.exists()
