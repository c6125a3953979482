"""Progress of the long phases before training: one line each, none for a phase that failed."""

from __future__ import annotations

import pytest

from gnntrain.data.phases import phase


def test_a_phase_ends_with_one_line_naming_it_its_time_and_peak(capsys) -> None:
    with phase("partition g into 4 parts (metis)", total=4) as progress:
        for _ in range(4):
            progress.advance()
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("gnntrain: partition g into 4 parts (metis): ") and " s, peak " in line
    assert line.endswith(" GiB")


def test_a_failed_phase_prints_no_line(capsys) -> None:
    with pytest.raises(RuntimeError), phase("load dataset g"):
        raise RuntimeError("broken")
    assert capsys.readouterr().out == ""


def test_under_torchrun_the_line_names_the_rank(capsys, monkeypatch) -> None:
    monkeypatch.setenv("RANK", "3")
    with phase("generate dataset g"):
        pass
    assert capsys.readouterr().out.startswith("gnntrain (rank 3): generate dataset g: ")
