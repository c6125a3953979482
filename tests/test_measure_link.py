"""``gnntrain-measure-link``: a real link measured over torch.distributed and written as a network
preset that runs compose and time on (:mod:`gnntrain.commands.measure_link`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gnntrain.commands.measure_link import main
from gnntrain.job import api


def test_the_loopback_measured_is_a_description_runs_compose(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    main(["network=none", "--name", "host_probe", "--out", str(tmp_path), "--rounds", "50", "--streams", "3",
          "--seconds", "0.05"])
    written = tmp_path / "network" / "host_probe.yaml"
    text = written.read_text()
    assert text.startswith("# Measured by gnntrain-measure-link") and "half round trip of 64-byte messages" in text
    out = capfd.readouterr().out
    assert f"written: {written} (network=host_probe)" in out
    overrides = out.rsplit("as overrides: ", 1)[1].split()
    network = api.check(api.compose(overrides)).network
    assert network.bandwidth_gbps > 0.1 and network.send_overhead_us == network.recv_overhead_us > 0
    assert network.latency_us == 0.0, "the loopback's whole half round trip is the host's"


@pytest.mark.parametrize("args, line", [
    (["network=eth10g", "--name", "x"], "network=eth10g: a described link is a model, not a link to measure"),
    (["network=none", "--name", "a-b"], "--name a-b: valid: letters, digits and underscores"),
    (["network=none", "--name", "x", "--rounds", "1"], "--rounds 1"),
])
def test_what_cannot_be_measured_is_refused_in_one_line(args: list[str], line: str, tmp_path: Path) -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "gnntrain-measure-link"), *args, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and line in done.stderr and done.stderr.count("\n") == 1, done.stderr
