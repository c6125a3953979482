"""gnntrain-predict: every method's epoch time, traffic and memory on a described cluster,
predicted without training (:mod:`gnntrain.predict`).

    gnntrain-predict strategy=vanilla,pipegcn,bns,adaqp,gnnpipe cluster.world_size=4 network=eth10g

takes the overrides a run takes, a comma list sweeping any of them as ``gnntrain -m`` does. The
cluster is ``cluster.world_size`` ranks, ``network.gpus_per_node`` of them per node, joined by the
``network`` links (``network.bandwidth_gbps`` and ``latency_us`` between nodes, ``intra_*``
within one); ``--device`` names the device whose profile prices the compute (``cpu``: this
machine's, one core per rank unless ``--cores``; or a committed profile,
``results/device_profiles/``, which ``--measure-profile`` writes on a machine that has the device)
and ``--node-memory-gib`` what a node holds (default: this machine's memory for ``cpu``, the
device's for a GPU).

Per setting it prints each method's predicted epoch (virtual clock) split into compute and the
exposed and hidden communication per kind, its bytes per epoch per kind, its peak memory per
rank and whether the ranks of a node fit, and the methods ranked; ``--plot`` draws every method's
epoch against the link bandwidth (``--bandwidths LO:HI:N`` Gbit/s), where crossing lines say
which method wins on which network. A graph too big for this machine is given by its statistics,
``--nodes --edges --features --classes``, and predicted through a scaled synthetic proxy of
``--proxy-nodes`` nodes (:mod:`gnntrain.cost.shape`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gnntrain.commands.replay import bandwidths
from gnntrain.errors import ConfigError, command_errors
from gnntrain.storage.files import figure_format


def parser() -> argparse.ArgumentParser:
    """The command's arguments; parsing them imports nothing heavy, so a usage error is at once."""
    parser = argparse.ArgumentParser(prog="gnntrain-predict", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="overrides as gnntrain takes them; a,b,c sweeps a key")
    parser.add_argument("--device", default="cpu",
                        help="cpu (this machine, measured once), a spec sheet (v100, a100, rtx-2080-ti, rtx-a6000, "
                             "h100) or a committed profile")
    parser.add_argument("--cores", type=int, default=1, help="CPU cores per rank (default 1)")
    parser.add_argument("--compute", choices=("profiled", "counted"), default="profiled",
                        help="profiled (default with --device cpu): each method's steps run on three proxies here "
                             "and fitted, cached; counted: kernel counts priced by the device profile alone (what "
                             "a device not at hand gets)")
    parser.add_argument("--reprofile", action="store_true", help="measure the step profiles again, not from the cache")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress (settings, profiled proxies, bars, estimates): the answer alone")
    parser.add_argument("--node-memory-gib", type=float, default=None, help="memory of a node (default: the device's)")
    parser.add_argument("--bandwidths", default="0.1:100:13", help="LO:HI:N Gbit/s for the plot (default 0.1:100:13)")
    parser.add_argument("--plot", type=Path, default=None,
                        help="draw every method's epoch against the link bandwidth into this PNG (none by default)")
    parser.add_argument("--json", type=Path, default=None, help="also write the predictions to this JSON file")
    for name in ("nodes", "edges", "features", "classes"):
        parser.add_argument(f"--{name}", type=int, default=None, help=f"the graph's {name} (with the other three)")
    parser.add_argument("--proxy-nodes", type=int, default=100_000, help="nodes of the proxy (default 100000)")
    parser.add_argument("--measure-profile", action="store_true",
                        help="measure this machine's device (cluster.device) and write its profile to "
                             "results/device_profiles/, where --device finds it by name; predict nothing")
    return parser


def checked(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` whose values are each in range (a plot's format, the cores, a node's memory, the
    bandwidths), checked before anything heavy is imported; one line naming the bad value otherwise."""
    if args.plot is not None:
        figure_format(args.plot)
    if not 1 <= args.cores <= 4096:
        raise ConfigError(f"--cores {args.cores}: valid: CPU cores per rank, 1 to 4096")
    if args.node_memory_gib is not None and not 0 < args.node_memory_gib < 1e6:
        raise ConfigError(f"--node-memory-gib {args.node_memory_gib}: valid: a node's memory in GiB, "
                          "finite and > 0")
    bandwidths(args.bandwidths)
    return args


def main(argv: list[str] | None = None) -> None:
    with command_errors("gnntrain-predict"):
        args = checked(parser().parse_args(argv))
    from gnntrain.commands.predict_sweep import predict

    predict(args)


if __name__ == "__main__":
    main()
