"""``gnntrain-predict`` (:mod:`gnntrain.commands.predict`): a sweep of methods predicted without
training, ranked, plotted against the bandwidth; a graph given by its statistics through a proxy;
bad input in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gnntrain.commands import predict_sweep
from gnntrain.cost import profile
from gnntrain.commands.predict import main

SETTING = ["dataset.num_nodes=600", "cluster.world_size=2", "network=eth10g"]


def test_a_sweep_is_predicted_ranked_and_plotted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    main(["strategy=vanilla,pipegcn,minibatch", *SETTING, "--plot", str(tmp_path / "p.png"),
          "--json", str(tmp_path / "p.json"), "--bandwidths", "0.5:50:3", "--compute", "counted"])
    out = capsys.readouterr().out
    assert re.search(r"gnntrain-predict: setting 2/3: strategy=pipegcn \(\d+ s so far, about \d+ s left\)", out), \
        "progress, one line per setting, with what is left"
    assert "gnntrain-predict: 2 ranks, 1 per node; device cpu" in out and "compute counted" in out
    for name in ("vanilla", "pipegcn", "minibatch"):
        assert f"  {name}: exposed ms: " in out
    ranked = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in ranked] == ["1", "2", "3"]
    assert f"predicted fastest: {ranked[0][1]}" in out
    figures = json.loads((tmp_path / "p.json").read_text())
    assert {p["strategy"] for p in figures["predictions"]} == {"vanilla", "pipegcn", "minibatch"}
    assert all(len(points) == 3 for points in figures["curves"].values())
    slow, fast = figures["curves"]["vanilla"][0][1], figures["curves"]["vanilla"][-1][1]
    assert slow > fast
    assert (tmp_path / "p.png").stat().st_size > 0


def test_quiet_gives_the_answer_alone(capsys: pytest.CaptureFixture) -> None:
    main(["strategy=vanilla,pipegcn", *SETTING, "--compute", "counted", "--quiet"])
    captured = capsys.readouterr()
    assert "predicted fastest:" in captured.out
    assert "setting 1/2" not in captured.out and "gnntrain: " not in captured.out + captured.err, "no progress"


def test_a_plot_is_written_only_where_asked_and_never_through_a_link(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """No plot by default (nothing written into the current folder); ``--plot NAME`` writes NAME
    itself, not NAME.png; a link planted at the plot's or the JSON's path is replaced by the file,
    its target left as it was."""
    outside = tmp_path / "outside"
    outside.mkdir()
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    main(["strategy=vanilla", *SETTING, "--compute", "counted"])
    assert list(here.iterdir()) == []
    main(["strategy=vanilla", *SETTING, "--compute", "counted", "--plot", "rpout"])
    assert sorted(p.name for p in here.iterdir()) == ["rpout"] and (here / "rpout").read_bytes()[:4] == b"\x89PNG"
    for name in ("p.png", "p.json"):
        (outside / name).write_text("kept")
        (here / name).symlink_to(outside / name)
    main(["strategy=vanilla", *SETTING, "--compute", "counted", "--plot", "p.png", "--json", "p.json"])
    for name in ("p.png", "p.json"):
        assert (outside / name).read_text() == "kept" and not (here / name).is_symlink()
    assert json.loads((here / "p.json").read_text())["predictions"][0]["strategy"] == "vanilla"


def test_a_dataset_of_the_users_own_config_folder_is_predicted(tmp_path: Path) -> None:
    """``hydra.searchpath=[file://DIR]`` adds a config folder, as ``--config-dir`` does for
    ``gnntrain``: a dataset YAML of the user's own is predicted like a packaged one."""
    (tmp_path / "conf" / "dataset").mkdir(parents=True)
    (tmp_path / "conf" / "dataset" / "mygraph.yaml").write_text("defaults:\n  - synthetic\n  - _self_\n"
                                                               "name: mygraph\nnum_nodes: 700\n")
    main(["strategy=vanilla", "dataset=mygraph", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
          "cluster.world_size=2", "--compute", "counted", "--json", str(tmp_path / "p.json")])
    assert json.loads((tmp_path / "p.json").read_text())["predictions"][0]["strategy"] == "vanilla"


@pytest.mark.slow
def test_a_graph_given_by_its_statistics_is_predicted_through_a_proxy(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    main(["strategy=vanilla", "cluster.world_size=2", "network=eth10g", "--nodes", "50000", "--edges", "500000",
          "--features", "16", "--classes", "4", "--proxy-nodes", "5000", "--compute", "counted", "--json", str(tmp_path / "p.json"),
          "--plot", str(tmp_path / "p.png")])
    assert "graph of 50000 nodes, 500000 edges through a proxy of 5000" in capsys.readouterr().out
    vanilla = json.loads((tmp_path / "p.json").read_text())["predictions"][0]
    features_and_hidden = (16 + 16) * 4
    assert 0 < vanilla["bytes_by_kind"]["halo_fwd"] < 50000 * features_and_hidden


def test_a_method_that_does_not_fit_a_node_is_listed_apart(capsys: pytest.CaptureFixture) -> None:
    main(["strategy=vanilla,pipegcn", *SETTING, "--compute", "counted", "--node-memory-gib", "0.25"])
    out = capsys.readouterr().out
    assert "predicted fastest: none fits a node" in out
    assert out.count("does not fit: 1 x") == 2 and "not ranked" in out


def test_the_answer_states_the_published_error(tmp_path: Path) -> None:
    published = {"commit": "abc1234", "summary": {"full_graph_median_error": 0.05, "full_graph_worst_error": 0.2,
                                                  "minibatch_median_error": 0.03, "by_regime": {
                                                      "compute-bound": {"full_graph_median_error": 0.04,
                                                                        "full_graph_worst_error": 0.1, "cells": 8}}}}
    (tmp_path / "check.json").write_text(json.dumps(published))
    line = predict_sweep.stated_error(tmp_path / "check.json")
    assert line.startswith("stated error (make predict-check at abc1234") and "median 5.0%, worst 20.0%" in line
    assert "compute-bound cells: median 4.0%" in line
    assert "none published" in predict_sweep.stated_error(tmp_path / "missing.json")


def test_a_device_not_at_hand_is_priced_from_its_spec_sheet_and_says_so(capsys: pytest.CaptureFixture) -> None:
    main(["strategy=vanilla", *SETTING, "--device", "h100"])
    out = capsys.readouterr().out
    assert "device h100" in out and "(spec sheet: NVIDIA H100 datasheet" in out
    assert "no step of a method profiled on it" in out and "predicted fastest: vanilla" in out


def test_a_measured_profile_is_written_where_device_finds_it(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """In a source checkout (a pyproject.toml above ``results/``); refused in one line where
    gnntrain runs from an installed package, whose tree it would write into."""
    canned = profile.DeviceProfile("NVIDIA Test GPU", 1e-6, (1e-12,) * 4, (1e-11,) * 4, 1e-12, 2e-12, 80.0)
    monkeypatch.setattr(predict_sweep, "measure", lambda device: canned)
    monkeypatch.setattr(predict_sweep, "saved_name", lambda device: "nvidia-test-gpu")
    installed = tmp_path / "site-packages" / "results" / "device_profiles"
    monkeypatch.setattr(profile, "COMMITTED", installed)
    with pytest.raises(SystemExit):
        main(["--measure-profile"])
    assert "an installed package; valid: run it from a checkout" in capsys.readouterr().err
    assert not installed.exists()
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\n")
    monkeypatch.setattr(profile, "COMMITTED", checkout / "results" / "device_profiles")
    main(["--measure-profile"])
    assert "(--device nvidia-test-gpu)" in capsys.readouterr().out
    assert profile.profile_for("nvidia-test-gpu", str(tmp_path / "cache")) == canned


@pytest.mark.parametrize("args, line", [
    (["--device", "tpu-v9"], "gnntrain-predict: error: device 'tpu-v9' has no profile; valid: cpu (measured here); "
                             "spec sheets: v100, a100, rtx-2080-ti, rtx-a6000, h100; "),
    (["--nodes", "1000"], "gnntrain-predict: error: --nodes, --edges, --features and --classes describe a graph"),
    (["--bandwidths", "5"], "gnntrain-predict: error: --bandwidths 5: valid: LO:HI:N"),
    (["--bandwidths", "nan:10:3"], "gnntrain-predict: error: --bandwidths nan:10:3: valid: LO:HI:N with finite"),
    (["--bandwidths", "100:0.1:5"], "gnntrain-predict: error: --bandwidths 100:0.1:5: valid"),
    (["--bandwidths", "0.1:10:100000"], "gnntrain-predict: error: --bandwidths 0.1:10:100000: valid: LO:HI:N with "
                                        "finite 0 < LO < HI and 2 <= N <= 200"),
    (["--nodes", "10", "--edges", "10", "--features", "10", "--classes", "2", "--proxy-nodes", "0"],
     "gnntrain-predict: error: --proxy-nodes 0: valid: a positive count"),
    (["--cores", "0"], "gnntrain-predict: error: --cores 0: valid: CPU cores per rank, 1 to 4096"),
    (["--cores", "-4"], "gnntrain-predict: error: --cores -4: valid"),
    (["--node-memory-gib", "-1"], "gnntrain-predict: error: --node-memory-gib -1.0: valid: a node's memory in GiB"),
    (["--node-memory-gib", "nan"], "gnntrain-predict: error: --node-memory-gib nan: valid"),
    (["--plot", "p.txt"], "gnntrain-predict: error: figure p.txt: format 'txt'; valid: png, pdf, svg"),
    (["--plot", "/dev/null", "--compute", "counted"],
     "gnntrain-predict: error: /dev/null is not a regular file; valid: a regular file or a new path"),
    (["--nodes", "10000000000", "--edges", "100000000000", "--features", "100", "--classes", "2",
      "--proxy-nodes", "10000000000"], "gnntrain-predict: error: --proxy-nodes 10000000000: building its proxy"),
])
def test_bad_input_ends_in_one_line(args: list[str], line: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as ended:
        main([*SETTING, *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert ended.value.code == 2 and err[-1].startswith(line) and len(err) == 1, err


@pytest.mark.slow  # 8 s here: OGB's import and its dataset's probe
def test_a_dataset_not_here_is_never_downloaded_and_the_statistics_route_is_offered(
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GNNTRAIN_DATA", str(tmp_path / "empty"))
    with pytest.raises(SystemExit) as ended:
        main(["dataset=ogbn-products", "strategy=vanilla", "cluster.world_size=2", "network=eth10g"])
    err = capsys.readouterr().err.strip().splitlines()
    assert ended.value.code != 0 and len(err) == 1, err
    assert "(dataset.download=false)" in err[0], "a prediction downloads nothing"
    assert err[0].endswith("drop dataset=ogbn-products and give --nodes N --edges E --features F --classes C "
                           "(directed edges; docs/usage.md shows ogbn-products' as an example)")


@pytest.mark.slow
def test_sigterm_while_profiling_ends_it_in_one_line(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "GNNTRAIN_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "gnntrain.commands.predict", "strategy=vanilla", *SETTING,
                             "--reprofile", "--plot", str(tmp_path / "p.png")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    seen = ""
    while "profiling vanilla's steps" not in seen:
        seen += proc.stderr.readline()
        assert proc.poll() is None, seen
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    err = (seen + proc.communicate(timeout=60)[1]).strip().splitlines()
    assert proc.returncode == 2, err
    assert err[-1] == "gnntrain-predict: error: interrupted by SIGTERM", err[-5:]


@pytest.mark.slow
def test_a_large_world_shows_each_pricing_step(capsys: pytest.CaptureFixture) -> None:
    """From 64 ranks a setting's pricing takes seconds to minutes: its two steps are shown as they
    run (a bar on a terminal) and end with a line each; the bandwidth curve is replayed only for a
    plot or JSON that shows it."""
    main(["strategy=vanilla", "cluster.world_size=64", "dataset.num_nodes=3000", "network=eth10g",
          "--compute", "counted"])
    out = capsys.readouterr().out
    assert "predict vanilla on 64 ranks: 3 epochs written: " in out
    assert re.search(r"predict vanilla on 64 ranks: \d+ events replayed on 1 network\(s\): ", out), out
