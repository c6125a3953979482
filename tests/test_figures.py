"""Every figure builder of the tables, the report, replay and the compare build, rendered on small
data: the image has a sensible size, no title or label reaches past its edge, every interval the
figure's numbers have is drawn (error bars, bands), a figure of many series is split into panels,
and each is titled with its setting and clock."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.container import ErrorbarContainer

from gnntrain.commands import replay_trace
from gnntrain.report import plot_accuracy_vs_time
from gnntrain.report.stats import Ratio
from gnntrain.repro import gnnpipe, replayed, tables
from gnntrain.repro.paper import Curve

matplotlib.use("Agg")

SUMMARY = SimpleNamespace(dataset="cora", num_nodes=2708, num_edges=10556, model="gcn", world_size=2, clock="virtual",
                          strategy="pipegcn")


def _run(seed: int, epochs: int = 6) -> SimpleNamespace:
    records = [SimpleNamespace(epoch=e, epoch_time=0.01 * (1 + seed / 10), val_acc=0.1 * e + 0.01 * seed,
                               loss=1 / e) for e in range(1, epochs + 1)]
    return SimpleNamespace(summary=SUMMARY, records=records, config={"seed": seed}, path=Path(f"run{seed}"))


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list:
    """The figures the builders save, kept open for inspection after they are written."""
    figures = []
    for module in (tables, gnnpipe, replayed, replay_trace):
        real = module.save_figure

        def keep(fig, path, real=real, **options):
            real(fig, path, **options)
            figures.append((fig, path))
        monkeypatch.setattr(module, "save_figure", keep)
    monkeypatch.setattr("gnntrain.report.save_figure", lambda fig, path, **o: (tables.save_figure(fig, path, **o)))
    monkeypatch.setattr(matplotlib.pyplot, "close", lambda fig=None: None)
    return figures


def _inside(fig, path: Path) -> None:
    """The PNG is of a sensible size and holds every title and label drawn."""
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert 300 <= width <= 4000 and 200 <= height <= 3000, (path.name, width, height)
    renderer = fig.canvas.get_renderer()
    box = fig.get_tightbbox(renderer)
    for text in fig.findobj(matplotlib.text.Text):
        if text.get_visible() and text.get_text():
            extent = text.get_window_extent(renderer)
            assert extent.width <= box.width * fig.dpi + 1 and extent.height <= box.height * fig.dpi + 1, text.get_text()
    titles = [t.get_text() for t in fig.findobj(matplotlib.text.Text) if "clock" in t.get_text()]
    assert titles, f"{path.name}: no title names its clock"


def test_bars_draw_each_interval_and_name_setting_and_clock(drawn: list, tmp_path: Path) -> None:
    groups = {"2 partitions": {"vanilla": Ratio([1.0, 1.1, 0.9]), "PipeGCN": Ratio([1.6, 1.7, 1.5])},
              "4 partitions": {"vanilla": Ratio([0.8, 0.85, 0.82]), "PipeGCN": Ratio([1.2])}}
    tables.bars(groups, "epochs / s", tmp_path / "throughput.png", "PipeGCN in shape", tables.figure_setting(_run(0)))
    fig, path = drawn[-1]
    _inside(fig, path)
    errorbars = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert len(errorbars) == 2, "one error-bar set per method"
    low, high = Ratio([1.6, 1.7, 1.5]).bounds
    segments = errorbars[1].lines[2][0].get_segments()
    assert segments[0][0][1] == pytest.approx(low) and segments[0][1][1] == pytest.approx(high)


def test_convergence_curves_draw_a_band_over_seeds(drawn: list, tmp_path: Path) -> None:
    tables.curves({"vanilla": [_run(0), _run(1), _run(2)], "PipeGCN": _run(3)}, tmp_path / "convergence.png",
                  "PipeGCN convergence")
    fig, path = drawn[-1]
    _inside(fig, path)
    bands = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1, "a band for the mean of three seeds, none for one run"


def test_many_series_are_split_into_small_multiples(drawn: list, tmp_path: Path) -> None:
    names = [f"strategy{i}" for i in range(14)]
    runs = [_run(seed) for _ in names for seed in range(3)]
    plot_accuracy_vs_time(runs, [n for n in names for _ in range(3)], 0.5, tmp_path / "accuracy_vs_time.png",
                          log_time=True, title="compare, slow link")
    fig, path = drawn[-1]
    _inside(fig, path)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 3, "14 series, at most 6 a panel"
    for ax in panels:
        assert len({line.get_color() for line in ax.get_lines() if not line.get_label().startswith("target")}) <= 6


def test_the_replayed_share_curve_draws_its_band_and_the_papers_point(drawn: list, tmp_path: Path) -> None:
    curve = Curve(("experiment=pipegcn_table4",), ("strategy=vanilla",), ("strategy=pipegcn",), ("a", "a"),
                  "PipeGCN over vanilla", 0.66, 1.91, "Table 4")
    points = [SimpleNamespace(share=s, speedup=Ratio([1 + s, 1.1 + s, 0.95 + s]),
                              bound=lambda name, s=s: 1 / max(s, 1 - s)) for s in (0.2, 0.5, 0.8)]
    replayed._plot(curve, points, tmp_path / "share_curve_replayed.png")
    fig, path = drawn[-1]
    _inside(fig, path)
    assert any(isinstance(c, PolyCollection) for c in fig.axes[0].collections), "the 95% band"


def test_the_stage_breakdown_keeps_every_bar(drawn: list, tmp_path: Path) -> None:
    parts = {f"{model} {name}": {"compute": 1.0, "communication": 0.5, "bubble": 0.1}
             for model in ("gcn", "sage", "gcnii") for name in ("graph", "pipeline stage 0", "pipeline stage 1")}
    gnnpipe._stacked(parts, tmp_path / "breakdown.png", tables.figure_setting(_run(0)))
    fig, path = drawn[-1]
    _inside(fig, path)
    ax = fig.axes[0]
    left, right = ax.get_xlim()
    assert left < -0.4 and right > len(parts) - 0.6, "no bar cut at either end"
    assert ax.get_ylim()[1] > 1.6, "nor at the top"
    assert [t.get_text() for t in ax.get_xticklabels()] == list(parts)


def test_replays_sweep_plot_shows_waiting_beside_the_papers_share(drawn: list, tmp_path: Path) -> None:
    rows = [{"bandwidth_gbps": g, "epoch_s": 0.1 / g + 0.01, "comm_share": 0.0, "exposed_share": 0.4 / (1 + g)}
            for g in (0.1, 1.0, 10.0)]
    run = SimpleNamespace(summary=SUMMARY)
    replay_trace._plot(rows, run, None, tmp_path / "curve.png")
    fig, path = drawn[-1]
    _inside(fig, path)
    shares = fig.axes[1]
    assert len(shares.get_lines()) == 2 and "waiting" in shares.get_legend().get_texts()[1].get_text()
