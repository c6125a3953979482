"""gnntrain-measure-link: a real link measured over ``torch.distributed``, written as a cluster
description (a ``network`` preset) the virtual clock times runs on.

    gnntrain-measure-link [OVERRIDES] --name NAME [--out CONF_DIR]

runs a job of ``cluster.world_size`` ranks on the link the overrides make (``network=none``:
this host's loopback; ``network.mode=kernel network.bandwidth_gbps=1``: real TCP over a shaped
link between network namespaces; under torchrun, the machines' own network) and, between
rank 0 and a rank of another node (and, with ``network.gpus_per_node``, one of its own node):

* a *ping-pong* of small messages (:data:`SMALL_BYTES`): the median half round trip is what one
  message costs end to end, ``o_send + latency + o_recv`` (LogGP);
* a *stream* of large messages sent back to back (:data:`STREAM_BYTES` each, the receiver's
  posted first), acknowledged by one small message: the bandwidth is their payload over the time
  less the acknowledgement's half round trip, on the wire as the model counts bytes
  (:func:`gnntrain.timing.cluster.wire`).

LogGP's ``o`` is the host's part of the half round trip: the same ping-pong over this host's
loopback (a second job on ``network=none``, unless the link measured is the loopback itself, or
``--overhead-from NAME`` takes it from a description already measured so, which a job under
torchrun must: it cannot start a local one), where no wire adds time; split evenly between sending
and receiving (a ping-pong cannot tell the two ends apart: a choice, stated in the description).
The link's latency is the rest of its half round trip. A described link (``network=eth10g``) is
refused: it is a model, not a link to measure. Each figure is the median over ``--rounds`` (ping-pong) and ``--streams``
(streams) repeats, with its spread in the file's comment.

The description is written to ``CONF_DIR/network/NAME.yaml`` (default ``CONF_DIR``: this
checkout's ``conf``, where ``network=NAME`` finds it; elsewhere pass
``hydra.searchpath=[file://CONF_DIR]``), and its overrides are printed.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist

from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.errors import GnntrainError, command_errors
from gnntrain.storage.files import write_atomically
from gnntrain.job import api
from gnntrain.job.launch.join import under_torchrun
from gnntrain.parallel.mesh import WorkerContext
from gnntrain.timing.cluster import FRAME_BYTES, SEGMENT_BYTES, modelled

SMALL_BYTES = 64
"""A ping-pong's message: 16 float32 values."""
STREAM_BYTES = 4 * 2**20
"""A stream's message."""
WARMUP = 10
"""Round trips and streams first made and not counted (connections, buffers)."""
CONF = Path(__file__).resolve().parents[2] / "conf"
FIGURES = "link.json"
"""What the probe's rank 0 writes into its run dir."""


def _ping_pong(me: int, peer: int, first: bool, rounds: int, device: torch.device) -> list[float]:
    """Half round trips of small messages between ``me`` and ``peer`` (``first`` sends first)."""
    out, back = torch.ones(SMALL_BYTES // 4, device=device), torch.empty(SMALL_BYTES // 4, device=device)
    halves = []
    for i in range(WARMUP + rounds):
        start = time.perf_counter()
        if first:
            dist.send(out, peer)
            dist.recv(back, peer)
        else:
            dist.recv(back, peer)
            dist.send(out, peer)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= WARMUP and first:
            halves.append((time.perf_counter() - start) / 2)
    return halves


def _streams(me: int, peer: int, first: bool, messages: int, repeats: int, device: torch.device) -> list[float]:
    """Seconds of ``messages`` large messages from ``me`` to ``peer``, back to back, each stream
    acknowledged by one small message (the sender's clock)."""
    data = torch.ones(STREAM_BYTES // 4, device=device)
    ack = torch.ones(SMALL_BYTES // 4, device=device)
    times = []
    for i in range(1 + repeats):
        dist.barrier()
        if first:
            start = time.perf_counter()
            for work in [dist.isend(data, peer) for _ in range(messages)]:
                work.wait()
            dist.recv(ack, peer)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= 1:
                times.append(time.perf_counter() - start)
        else:
            buffers = [torch.empty_like(data) for _ in range(messages)]
            for work in [dist.irecv(b, peer) for b in buffers]:
                work.wait()
            dist.send(ack, peer)
    return times


def probe(run: RootConfig, ctx: WorkerContext, job: JobData, *, rounds: int, streams: int,
          seconds: float) -> dict | None:
    """Every rank's part of the measurement (module docstring); rank 0 writes the figures per
    level, its partner on another node (``inter``) and, with ``network.gpus_per_node``, on its
    own (``intra``), to :data:`FIGURES` in the run dir, and returns them."""
    device = ctx.device
    per_node = run.network.gpus_per_node or 1
    pairs = {"inter": per_node}
    if per_node > 1:
        pairs["intra"] = 1
    figures = {}
    for level, partner in pairs.items():
        if partner >= ctx.world_size:
            raise GnntrainError(f"cluster.world_size={ctx.world_size} has no rank {partner} to measure the {level} "
                                f"link with; valid: cluster.world_size >= {partner + 1}")
        dist.barrier()
        taking_part = ctx.rank in (0, partner)
        halves = (_ping_pong(ctx.rank, partner if ctx.rank == 0 else 0, ctx.rank == 0, rounds, device)
                  if taking_part else [])
        half = statistics.median(halves) if halves else 0.0
        # a first stream sizes the measured ones to about ``seconds`` each
        size = torch.tensor([1.0], device=device)
        if ctx.rank == 0:
            trial = _streams(0, partner, True, 2, 1, device)[0]
            size[0] = max(2, min(256, round(seconds * 2 / max(trial, 1e-6))))
        elif taking_part:
            _streams(partner, 0, False, 2, 1, device)
        else:
            dist.barrier()
            dist.barrier()
        dist.broadcast(size, 0)
        messages = int(size[0])
        if taking_part:
            times = _streams(ctx.rank, partner if ctx.rank == 0 else 0, ctx.rank == 0, messages, streams, device)
        else:
            for _ in range(1 + streams):
                dist.barrier()
            times = []
        if ctx.rank == 0:
            payload = messages * STREAM_BYTES
            rates = [payload / max(t - half, 1e-9) for t in times]
            figures[level] = {"half_round_trips_s": halves, "stream_s": times, "stream_bytes": payload,
                              "half_round_trip_s": half, "payload_bytes_per_s": statistics.median(rates)}
    if ctx.rank != 0:
        return None
    write_atomically(Path(run.run_dir) / FIGURES, json.dumps(figures))
    return figures


def _measured(overrides: list[str], args: argparse.Namespace) -> tuple[RootConfig, dict | None]:
    """The measurement's run and rank 0's figures (None on the other ranks of a torchrun job)."""
    with tempfile.TemporaryDirectory(prefix="gnntrain-measure-link-") as folder:
        run = api.check(api.compose([*overrides, "dataset.num_nodes=64", "train.epochs=1", "wandb.mode=disabled"],
                                    run_dir=folder))
        if modelled(run.network):
            raise GnntrainError(f"network={run.network.name}: a described link is a model, not a link to measure; "
                                "valid: network=none (this host's loopback, or the machines' network under "
                                "torchrun), network.mode=kernel network.bandwidth_gbps=<rate>")
        returned = api.run(run, partial(probe, rounds=args.rounds, streams=args.streams, seconds=args.seconds))
        if under_torchrun():
            return run, returned
        return run, json.loads((Path(folder) / FIGURES).read_text())


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1e6:.1f} us, range {min(values) * 1e6:.1f}-{max(values) * 1e6:.1f}"


def description(name: str, run: RootConfig, link: dict, o: float, said: str) -> tuple[str, list[str]]:
    """The preset's YAML and its overrides, from the link's figures and the host's cost of a
    message at each end, ``o`` (seconds; ``said``: where it comes from)."""
    keys, comment = {}, []
    for level, figures in link.items():
        prefix = "" if level == "inter" else "intra_"
        latency = max(0.0, figures["half_round_trip_s"] - 2 * o)
        keys[f"{prefix}bandwidth_gbps"] = round(figures["payload_bytes_per_s"] * FRAME_BYTES / SEGMENT_BYTES * 8 / 1e9, 4)
        keys[f"{prefix}latency_us"] = round(latency * 1e6, 2)
        keys[f"{prefix}send_overhead_us"] = keys[f"{prefix}recv_overhead_us"] = round(o * 1e6, 2)
        comment.append(f"{level}: half round trip of {SMALL_BYTES}-byte messages {_spread(figures['half_round_trips_s'])} "
                       f"over {len(figures['half_round_trips_s'])}; streams of {figures['stream_bytes'] / 2**20:.0f} MiB "
                       f"{statistics.median(figures['stream_s']):.3f} s (median of {len(figures['stream_s'])}): "
                       f"{figures['payload_bytes_per_s'] * 8 / 1e9:.4g} Gbit/s of payload")
    comment.append(f"o: {said}, split evenly between sending and receiving")
    if run.network.gpus_per_node:
        keys = {**{k: v for k, v in keys.items() if not k.startswith("intra_")}, "gpus_per_node": run.network.gpus_per_node,
                **{k: v for k, v in keys.items() if k.startswith("intra_")}}
    where = (f"network.mode=kernel at {run.network.bandwidth_gbps:g} Gbit/s" if run.network.mode == "kernel"
             else "the machines' network (torchrun)" if under_torchrun() else "this host's loopback")
    header = [f"# Measured by gnntrain-measure-link on {socket.gethostname()} at "
              f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: {where}, {run.cluster.world_size} ranks.",
              *(f"# {line}" for line in comment)]
    text = "\n".join([*header, "defaults:", "  - /schema/network/network@_here_", "  - _self_", "",
                      f"name: {name}", *(f"{k}: {v}" for k, v in keys.items())]) + "\n"
    return text, [f"network.{k}={v}" for k, v in keys.items()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gnntrain-measure-link", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="the link, as gnntrain takes it (network.mode=kernel ...)")
    parser.add_argument("--name", required=True, help="the preset's name (network=NAME)")
    parser.add_argument("--out", type=Path, default=CONF, help="the config folder to write network/NAME.yaml into")
    parser.add_argument("--rounds", type=int, default=2000, help="ping-pong round trips (default 2000)")
    parser.add_argument("--streams", type=int, default=5, help="streams (default 5)")
    parser.add_argument("--seconds", type=float, default=0.3, help="about how long a stream lasts (default 0.3)")
    parser.add_argument("--overhead-from", default=None, metavar="NAME",
                        help="take o from this loopback description instead of measuring the loopback again "
                             "(needed under torchrun)")
    args = parser.parse_args(argv)
    with command_errors("gnntrain-measure-link"):
        if not args.name.replace("_", "").isalnum():
            raise GnntrainError(f"--name {args.name}: valid: letters, digits and underscores")
        if min(args.rounds, args.streams) < 3 or not 0 < args.seconds <= 10:
            raise GnntrainError(f"--rounds {args.rounds} --streams {args.streams} --seconds {args.seconds}: valid: "
                                "at least 3 rounds and streams, 0 < seconds <= 10")
        if under_torchrun() and args.overhead_from is None:
            raise GnntrainError("under torchrun o cannot come from a local loopback job; valid: --overhead-from NAME, "
                                "a description of one machine's loopback (gnntrain-measure-link network=none --name NAME "
                                "run there first)")
        run, link = _measured(list(args.overrides), args)
        if link is None:  # another rank of a torchrun job: rank 0 writes
            return
        if args.overhead_from is not None:
            given = api.check(api.compose([f"network={args.overhead_from}"])).network
            o, said = given.send_overhead_us * 1e-6, f"from the description {args.overhead_from}"
        else:
            loopback = run.network.bandwidth_gbps is None and run.network.mode != "kernel"
            host = link if loopback else _measured([o for o in args.overrides if not o.startswith("network")]
                                                   + ["network=none"], args)[1]
            o = host["inter"]["half_round_trip_s"] / 2
            said = f"half of this host's loopback half round trip ({_spread(host['inter']['half_round_trips_s'])})"
        text, overrides = description(args.name, run, link, o, said)
        path = args.out / "network" / f"{args.name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text)
        print(text, end="")
        print(f"written: {path} (network={args.name}); as overrides: {' '.join(overrides)}")


if __name__ == "__main__":
    main()
