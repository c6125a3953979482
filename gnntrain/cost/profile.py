"""A device's price for each kernel class, measured once per machine by micro-benchmarks.

The predictor prices a step's :class:`~gnntrain.cost.kernels.KernelCounts` as

    t = ops * per_op + dense_flops * per_flop + sparse_products * per_product + bytes * per_byte

with constants taken from micro-benchmarks of the kernels the models run, never fitted to
end-to-end runs (the manner of Plexus's constants):

* ``per_op``: ten training steps of a tiny model (16 linear layers of 4 x 4 on 2 rows, Adam), per
  operation it runs: the launch and dispatch cost with autograd's and the modules' Python around
  it, which sets the time of a step on a small graph;
* ``per_flop``, per width class ``w`` (:data:`~gnntrain.cost.kernels.WIDTHS`): a linear
  layer's three products on ``[rows, 128]`` rows and a ``[128, w]`` weight: the forward's, the
  input gradient's and the weight gradient's (a long inner dimension);
* ``per_product``, per width class ``w``: a CSR aggregation (:func:`gnntrain.data.sparse.spmm`, the
  models' kernel) of ``rows`` rows of :data:`DEGREE` entries over ``w`` columns;
* ``per_byte``: the element-wise passes the models and their optimizer run, over ``[rows, 128]``:
  a ReLU, an add, the keyed dropout (:func:`gnntrain.rng.random16.dropout`: hashing integer
  passes), a log-softmax, Adam's multiply-add and square root;
* ``per_indexed_byte``: a gather and a scatter-add of ``rows`` random rows of ``[rows, 128]``
  and a transposing copy.

Each benchmark's work is counted as a step's is (:func:`gnntrain.cost.kernels.count`); its
median time less its operations' ``per_op`` is divided by that work. The clock is the
one the virtual clock charges compute with: on a CPU the thread's CPU time, on one thread (the
virtual clock runs each rank on one torch thread; a CPU rank of ``cores`` cores is predicted at
``cores`` times these rates but for ``per_op``, which no core shortens: a stated assumption of
perfect scaling); on a GPU CUDA events.

A CPU profile is measured on first use and cached per machine like a link calibration
(``<partition.cache_dir>/device_profile/<host>-cpu.json``; delete it to measure again); a GPU's
is measured where one is lent (``gnntrain-predict --measure-profile cluster.device=cuda`` on it)
and committed under ``results/device_profiles/<name>.json``, which ``--device <name>`` predicts
with.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from gnntrain.storage.cache import cache_folder
from gnntrain.errors import ConfigError
from gnntrain.cost.kernels import WIDTHS, KernelCounts, count
from gnntrain.rng.random16 import dropout
from gnntrain.data.sparse import SparseOperator, spmm

DEGREE = 16
ROWS = 20000
WIDTH = 128
COMMITTED = Path(__file__).resolve().parents[2] / "results" / "device_profiles"
"""Profiles measured elsewhere (GPUs lent to a session), committed."""


@dataclass(frozen=True)
class DeviceProfile:
    """Seconds per unit of each kernel class on one device (module docstring); products per width
    class (:data:`~gnntrain.cost.kernels.WIDTHS`)."""

    device: str
    per_op: float
    per_flop: tuple[float, ...]
    per_product: tuple[float, ...]
    per_byte: float
    per_indexed_byte: float
    memory_gib: float
    """The device's memory (a CPU: the machine's)."""

    def seconds(self, counts: KernelCounts, cores: int = 1) -> float:
        """The time ``counts`` take on this device, with ``cores`` cores where it is a CPU."""
        rates = (sum(n * c for n, c in zip(counts.dense_flops, self.per_flop))
                 + sum(n * c for n, c in zip(counts.sparse_products, self.per_product)) + counts.bytes * self.per_byte
                 + counts.indexed_bytes * self.per_indexed_byte)
        return counts.ops * self.per_op + rates / max(cores, 1)


def _timed(device: torch.device, work, repeats: int = 21) -> float:
    """The median time of ``repeats`` calls of ``work`` (after three to warm up), on the virtual
    clock's timeline for ``device``."""
    for _ in range(3):
        work()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            work()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            start_cpu = time.thread_time()
            work()
            times.append(time.thread_time() - start_cpu)
    return statistics.median(times)


def _rate(device: torch.device, work, per_op: float, unit: str) -> float:
    """Seconds per unit of ``unit`` (a :class:`KernelCounts` field; a product's: its one width
    class) of ``work``, its work counted as a step's is and its operations' ``per_op`` taken off."""
    done = count(work)
    amount = getattr(done, unit)
    return max(_timed(device, work) - done.ops * per_op, 0.0) / (sum(amount) if isinstance(amount, tuple) else amount)


def measure(device: torch.device) -> DeviceProfile:
    """Run the micro-benchmarks on ``device`` (one torch thread on a CPU)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = torch.Generator().manual_seed(0)
        tiny = torch.nn.Sequential(*(m for _ in range(16) for m in (torch.nn.Linear(4, 4), torch.nn.ReLU()))).to(device)
        optimizer = torch.optim.Adam(tiny.parameters())
        row = torch.ones(2, 4, device=device)

        def tiny_step() -> None:
            for _ in range(10):
                tiny(row).sum().backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=False)

        per_op = _timed(device, tiny_step) / count(tiny_step).ops
        x, g = (torch.randn(ROWS, WIDTH, generator=gen).to(device) for _ in range(2))
        rows = torch.arange(ROWS).repeat_interleave(DEGREE)
        cols = torch.randint(0, ROWS, (ROWS * DEGREE,), generator=gen)
        matrix = SparseOperator(rows.to(device), cols.to(device), torch.rand(rows.numel(), generator=gen).to(device),
                                (ROWS, ROWS)).matrix
        per_flop, per_product = [], []
        for width in WIDTHS:
            w = torch.randn(WIDTH, width, generator=gen).to(device)
            out_grad = torch.randn(ROWS, width, generator=gen).to(device)
            narrow = x[:, :width].contiguous()

            def linear_layer() -> None:
                x @ w
                out_grad @ w.t()
                x.t() @ out_grad

            per_flop.append(_rate(device, linear_layer, per_op, "dense_flops"))
            per_product.append(_rate(device, lambda: spmm(matrix, narrow), per_op, "sparse_products"))

        ids = torch.arange(ROWS, device=device)

        def element_wise() -> None:
            y = torch.relu(x)
            y = y + g
            dropout(y, 0.5, True, 1, ids)
            torch.log_softmax(y, dim=1)
            y.addcmul_(g, g, value=0.5).sqrt()

        picked = torch.randint(0, ROWS, (ROWS,), generator=gen).to(device)

        def indexed() -> None:
            x.index_select(0, picked)
            torch.zeros_like(x).index_add_(0, picked, g)
            x.t().contiguous()

        memory = (torch.cuda.get_device_properties(device).total_memory if device.type == "cuda"
                  else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        return DeviceProfile(torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu", per_op,
                             tuple(per_flop), tuple(per_product), _rate(device, element_wise, per_op, "bytes"),
                             _rate(device, indexed, per_op, "indexed_bytes"), memory / 2**30)
    finally:
        torch.set_num_threads(threads)


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def committed_profiles() -> dict[str, Path]:
    """The committed profiles, by the name ``cluster.device`` gives them (their file's stem)."""
    return {path.stem: path for path in sorted(COMMITTED.glob("*.json"))}


def load(path: Path) -> DeviceProfile:
    """A profile file (JSON of its fields; nothing in it runs)."""
    fields = json.loads(path.read_text())
    return DeviceProfile(str(fields["device"]), float(fields["per_op"]), tuple(map(float, fields["per_flop"])),
                         tuple(map(float, fields["per_product"])), float(fields["per_byte"]),
                         float(fields["per_indexed_byte"]), float(fields["memory_gib"]))


def profile_for(device: str, cache_dir: str) -> DeviceProfile:
    """``device``: ``cpu`` (this machine's, measured on first use and cached) or the name of a
    committed profile; ConfigError naming the valid ones otherwise."""
    if device == "cpu":
        path = cache_folder(cache_dir, "device_profile") / f"{_file_name(socket.gethostname())}-cpu.json"
        if not path.exists():
            path.write_text(json.dumps(asdict(measure(torch.device("cpu"))), indent=2) + "\n")
        return load(path)
    known = committed_profiles()
    if device not in known:
        committed = (f"one of {', '.join(sorted(known))} (results/device_profiles/, measured where that device was lent)"
                     if known else "no other: none is committed under results/device_profiles/ (measure one with "
                     "gnntrain-predict --measure-profile cluster.device=cuda where the device is)")
        raise ConfigError(f"device {device!r} has no profile; valid: cpu (measured here) or {committed}")
    return load(known[device])


def saved_name(device: torch.device) -> str:
    """The name :func:`profile_for` knows ``device``'s saved profile by."""
    return _file_name(torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu")


def save(profile: DeviceProfile) -> Path:
    """Write a measured profile where :func:`profile_for` finds it by name."""
    folder = COMMITTED
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_file_name(profile.device)}.json"
    path.write_text(json.dumps(asdict(profile), indent=2) + "\n")
    return path
