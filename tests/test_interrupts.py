"""A stop signal never cuts a deferred section (a W&B call, a checkpoint write) short: it is
raised where the section ends."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gnntrain.errors import JobInterrupted, interrupt, interrupts_deferred


@pytest.fixture
def sigterm_interrupts():
    previous = signal.signal(signal.SIGTERM, interrupt)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_a_signal_outside_a_deferred_section_stops_at_once(sigterm_interrupts) -> None:
    with pytest.raises(JobInterrupted, match="SIGTERM"):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs at the next bytecode
            pass


def test_a_signal_inside_a_deferred_section_is_raised_where_it_ends(sigterm_interrupts) -> None:
    steps = []
    with pytest.raises(JobInterrupted, match="SIGTERM"):
        with interrupts_deferred():
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                steps.append("inner")
            steps.append("outer")
        steps.append("after")
    assert steps == ["inner", "outer"]
    with interrupts_deferred():  # the stop was raised once
        steps.append("next")
    assert steps == ["inner", "outer", "next"]


def test_a_stop_that_a_library_raised_again_from_its_text_keeps_its_one_line() -> None:
    """OmegaConf rebuilds an exception it catches as ``type(exc)(text)`` with its own lines
    added: a SIGTERM landing while a config composes must still end in one line."""
    caught = JobInterrupted(signal.SIGTERM)
    rebuilt = type(caught)(f"{caught}\n    full_key: defaults[3]\n    object_type=list")
    assert rebuilt.signum == signal.SIGTERM and str(rebuilt) == "interrupted by SIGTERM"


def test_a_signal_replaces_an_error_the_deferred_section_raised_meanwhile(sigterm_interrupts) -> None:
    with pytest.raises(JobInterrupted) as stop:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            raise RuntimeError("a peer closed its connection")
    assert isinstance(stop.value.__context__, RuntimeError)


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.3, 0.8, 1.3, 1.8, 2.5])
def test_sigterm_during_start_up_ends_the_launcher_within_seconds_without_a_traceback(delay_s: float,
                                                                                     tmp_path) -> None:
    """Whether it lands while torch is imported, the fork server starts or the workers spawn."""
    job = subprocess.Popen([str(Path(sys.executable).with_name("gnntrain")), "dataset.num_nodes=2000",
                            "cluster.world_size=2", "train.epochs=100", f"hydra.run.dir={tmp_path}"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "WANDB_MODE": "disabled"})
    time.sleep(delay_s)
    job.send_signal(signal.SIGTERM)
    start = time.monotonic()
    _, err = job.communicate(timeout=30)
    assert time.monotonic() - start < 10 and job.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM)
    assert "Traceback" not in err, err

