"""A stop signal never cuts a deferred section (a W&B call, a checkpoint write) short: it is
raised where the section ends."""

import os
import signal

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


def test_a_signal_replaces_an_error_the_deferred_section_raised_meanwhile(sigterm_interrupts) -> None:
    with pytest.raises(JobInterrupted) as stop:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            raise RuntimeError("a peer closed its connection")
    assert isinstance(stop.value.__context__, RuntimeError)
