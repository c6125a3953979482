"""The virtual clock's network model (:mod:`gnntrain.timing.links`), worked by hand: both
ends' links, queues on a busy link, the ring all-reduce on the slowest level, two levels."""

from __future__ import annotations

import pytest

from gnntrain.timing.cluster import GBIT, Link, Topology, wire
from gnntrain.timing.links import LinkQueues, exchange_completion, one_sided_arrival, ring_completion
from gnntrain.timing.ops import RankLinks, VirtualOp

KEY = ((0, 1, 2, 3), -1, -1, (0, 0))

MB = 1_000_000
ONE = Topology({"inter": Link(1 * GBIT, 10e-6)})
TWO = Topology({"inter": Link(1 * GBIT, 10e-6), "intra": Link(10 * GBIT, 1e-6)}, gpus_per_node=2)


def seconds(nbytes: float, gbps: float = 1.0) -> float:
    return wire(nbytes) / (gbps * GBIT)


def test_an_exchange_waits_for_the_later_post_and_for_the_receivers_link() -> None:
    """Rank 1 receives 1 MB from each of ranks 0 and 2: its ingress carries 2 MB, so the exchange
    completes on it after both, however early the senders' links were through."""
    senders = {q: LinkQueues(ONE) for q in (0, 2)}
    stamps = {q: (0.0, (senders[q].post(q, 0.0, {1: MB}, {})[0]["inter"], 0.0)) for q in (0, 2)}
    receiver = LinkQueues(ONE)
    egress, ingress = receiver.post(1, 0.5e-3, {}, {0: MB, 2: MB})
    done = exchange_completion(ONE, 1, 0.5e-3, egress, ingress, [(0, MB, stamps[0]), (2, MB, stamps[2])])
    assert done == pytest.approx(0.5e-3 + seconds(2 * MB) + 10e-6)
    assert stamps[0][1][0] == pytest.approx(seconds(MB))


def test_a_late_sender_delays_only_its_own_message() -> None:
    receiver = LinkQueues(ONE)
    egress, ingress = receiver.post(1, 0.0, {}, {0: MB})
    late = (5e-3, (5e-3 + seconds(MB), 0.0))
    assert exchange_completion(ONE, 1, 0.0, egress, ingress, [(0, MB, late)]) == pytest.approx(
        5e-3 + seconds(MB) + 10e-6)


def test_a_transfer_posted_on_a_busy_link_queues_behind_it() -> None:
    queues = LinkQueues(ONE)
    first, _ = queues.post(0, 0.0, {1: MB}, {})
    second, _ = queues.post(0, 1e-4, {1: MB}, {})
    assert first["inter"] == pytest.approx(seconds(MB))
    assert second["inter"] == pytest.approx(2 * seconds(MB))


def test_a_one_sided_message_moves_from_its_senders_post() -> None:
    """A pipeline's send arrives one transfer after the sender posted it, however late the
    receiver asks; the receiver's ingress queues it behind what it already carries."""
    sender = LinkQueues(ONE)
    sent = (1e-3, tuple(sender.post(0, 1e-3, {1: MB}, {})[0][lv] for lv in ("inter", "intra")))
    receiver = LinkQueues(ONE)
    assert one_sided_arrival(ONE, receiver, 1, 0, MB, sent) == pytest.approx(1e-3 + seconds(MB) + 10e-6)
    busy = LinkQueues(ONE, ingress={"inter": 10e-3, "intra": 0.0})
    assert one_sided_arrival(ONE, busy, 1, 0, MB, sent) == pytest.approx(10e-3 + seconds(MB) + 10e-6)


def test_two_levels_time_a_node_and_the_links_between_nodes_apart() -> None:
    assert (TWO.level(0, 1), TWO.level(1, 2), TWO.level(3, 2)) == ("intra", "inter", "intra")
    queues = LinkQueues(TWO)
    egress, _ = queues.post(0, 0.0, {1: MB, 2: MB}, {})
    assert egress["intra"] == pytest.approx(seconds(MB, 10)) and egress["inter"] == pytest.approx(seconds(MB))
    assert TWO.ring_level([0, 1]) == "intra" and TWO.ring_level([0, 1, 2, 3]) == "inter"


def test_a_ring_all_reduce_takes_its_share_of_the_slowest_level_from_its_last_member() -> None:
    members = [LinkQueues(TWO) for _ in range(4)]
    reserved = [q.post_ring(0.001 * r, "inter", 4 * MB, 4) for r, q in enumerate(members)]
    share = seconds(2 * 3 / 4 * 4 * MB)
    assert reserved[3] == pytest.approx(0.003 + share)
    assert ring_completion(TWO, "inter", 4, reserved) == pytest.approx(0.003 + share + 2 * 3 * 10e-6)


def test_ideal_links_take_no_time() -> None:
    ideal = Topology()
    queues = LinkQueues(ideal)
    egress, ingress = queues.post(0, 1.0, {1: MB}, {1: MB})
    assert exchange_completion(ideal, 0, 1.0, egress, ingress, [(1, MB, (2.0, (2.0, 2.0)))]) == 2.0


def test_a_message_costs_the_host_its_levels_o_on_each_end() -> None:
    """LogGP's o: a rank posting messages spends the send cost on each before they leave, and the
    rank waiting for them the receive cost on each once they have arrived; a ring pays both on
    each of its steps, beside the latency."""
    costly = Topology({"inter": Link(1 * GBIT, 10e-6, 3e-6, 5e-6), "intra": Link(10 * GBIT, 1e-6, 1e-6, 2e-6)},
                      gpus_per_node=2)
    links = RankLinks(costly, 0)
    op = VirtualOp("exchange", "halo_fwd", 1.0, sent=[(1, MB, KEY), (2, MB, KEY), (3, MB, KEY)],
                   received=[(2, MB, KEY)])
    assert links.messages(op, "send") == {"intra": 1, "inter": 2}
    assert links.overhead(op, "send") == pytest.approx(1e-6 + 2 * 3e-6)
    assert links.overhead(op, "recv") == pytest.approx(5e-6)
    assert ring_completion(costly, "inter", 4, [2.0]) == pytest.approx(2.0 + 6 * (10e-6 + 3e-6 + 5e-6))
