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

A device nobody here has is priced from its spec sheet (:class:`SpecSheet`, :data:`SPEC_SHEETS`:
V100, A100, RTX 2080 Ti, RTX A6000, H100), stated as such (:attr:`DeviceProfile.source`) in every
prediction that uses it.

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
from gnntrain.storage.files import write_atomically
from gnntrain.storage.json_file import read_checked
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
    source: str = "measured"
    """Where the prices come from: ``measured`` (micro-benchmarks on the device) or the spec
    sheet a :class:`SpecSheet` read them from."""

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


FORMAT = 2
"""The profile file's version (1: no version field, before its checks)."""
FIELDS = {"version", "device", "per_op", "per_flop", "per_product", "per_byte", "per_indexed_byte", "memory_gib"}
COSTS = FIELDS - {"version", "device"}


def load(path: Path) -> DeviceProfile:
    """A profile file: JSON of its fields, read as :func:`~gnntrain.storage.json_file.read_checked`
    reads a file from someone else (a regular file under 1 MiB, version :data:`FORMAT`, every
    cost finite and >= 0; nothing in it runs)."""
    fields = read_checked(path, "device profile", FORMAT, FIELDS, COSTS)
    try:
        flops, products = tuple(map(float, fields["per_flop"])), tuple(map(float, fields["per_product"]))
        if len(flops) != len(WIDTHS) or len(products) != len(WIDTHS):
            raise ValueError(f"per_flop and per_product need {len(WIDTHS)} width classes each")
        return DeviceProfile(str(fields["device"]), float(fields["per_op"]), flops, products, float(fields["per_byte"]),
                             float(fields["per_indexed_byte"]), float(fields["memory_gib"]),
                             str(fields.get("source", "measured")))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"device profile {path}: {exc}; valid: the fields gnntrain-predict --measure-profile "
                          "writes") from None


def _dumped(profile: DeviceProfile) -> str:
    return json.dumps({"version": FORMAT, **asdict(profile)}, indent=2) + "\n"


def profile_for(device: str, cache_dir: str) -> DeviceProfile:
    """``device``: ``cpu`` (this machine's, measured on first use and cached; a cached file of
    another version measured again), the name of a committed profile, or of a spec sheet
    (:data:`SPEC_SHEETS`); ConfigError naming the valid ones in one line otherwise."""
    if device == "cpu":
        path = cache_folder(cache_dir, "device_profile") / f"{_file_name(socket.gethostname())}-cpu.json"
        if not path.exists() or _version(path) != FORMAT:
            write_atomically(path, _dumped(measure(torch.device("cpu"))))
        return load(path)
    known = committed_profiles()
    if device in known:
        return load(known[device])
    if device in SPEC_SHEETS:
        return SPEC_SHEETS[device].profile()
    committed = (f"committed (measured where the device was lent): {', '.join(sorted(known))}" if known else
                 "none committed under results/device_profiles/ yet (gnntrain-predict --measure-profile "
                 "cluster.device=cuda where the device is)")
    raise ConfigError(f"device {device!r} has no profile; valid: cpu (measured here); spec sheets: "
                      f"{', '.join(SPEC_SHEETS)}; {committed}")


def _version(path: Path) -> object:
    """The version a cached file claims (None: none, or no JSON object)."""
    try:
        fields = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return fields.get("version") if isinstance(fields, dict) else None


def saved_name(device: torch.device) -> str:
    """The name :func:`profile_for` knows ``device``'s saved profile by."""
    return _file_name(torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu")


def save(profile: DeviceProfile) -> Path:
    """Write a measured profile where :func:`profile_for` finds it by name: the source checkout's
    ``results/device_profiles``, where it is committed; refused in one line where gnntrain runs
    from an installed package, whose tree is not this command's to write."""
    folder = COMMITTED
    if not (folder.parents[1] / "pyproject.toml").is_file():
        raise ConfigError(f"--measure-profile writes into a source checkout's results/device_profiles, to be "
                          f"committed; this gnntrain runs from {folder.parents[1]}, an installed package; valid: run "
                          "it from a checkout (pip install -e .)")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_file_name(profile.device)}.json"
    write_atomically(path, _dumped(profile))
    return path


@dataclass(frozen=True)
class SpecSheet:
    """A device nobody here has, priced from its spec sheet by a roofline, with efficiencies of
    our choosing (stated, not measured): dense products at :data:`DENSE_EFFICIENCY` of the FP32
    peak or, where narrow, bound by memory (a product whose narrowest dimension is ``w`` moves
    about ``2 / w`` bytes per flop); streaming passes at :data:`STREAM_EFFICIENCY` of the memory
    bandwidth, gathers, scatters and sparse aggregations (4 bytes of a gathered row per product
    and 8 of index and value per nonzero, ``4 + 8 / w`` per unit) at :data:`GATHER_EFFICIENCY`;
    ``launch_us`` per operation, the eager-mode dispatch and launch of a kernel (no spec sheet
    gives it)."""

    name: str
    fp32_tflops: float
    memory_gbs: float
    """Memory bandwidth, GB/s."""
    memory_gib: float
    sheet: str
    launch_us: float = 10.0

    def profile(self) -> DeviceProfile:
        peak, stream = self.fp32_tflops * 1e12 * DENSE_EFFICIENCY, self.memory_gbs * 1e9 * STREAM_EFFICIENCY
        gather = self.memory_gbs * 1e9 * GATHER_EFFICIENCY
        return DeviceProfile(self.name, self.launch_us * 1e-6, tuple(max(1 / peak, 2 / w / stream) for w in WIDTHS),
                             tuple((4 + 8 / w) / gather + 2 / peak for w in WIDTHS), 1 / stream, 1 / gather,
                             self.memory_gib, f"spec sheet: {self.sheet}")


DENSE_EFFICIENCY = 0.7
STREAM_EFFICIENCY = 0.8
GATHER_EFFICIENCY = 0.4
SPEC_SHEETS = {
    "v100": SpecSheet("NVIDIA V100 SXM2 32GB", 15.7, 900, 32, "NVIDIA Tesla V100 datasheet (SXM2: 15.7 TFLOPS FP32, "
                      "900 GB/s HBM2)"),
    "a100": SpecSheet("NVIDIA A100 SXM4 80GB", 19.5, 2039, 80, "NVIDIA A100 datasheet (SXM4 80GB: 19.5 TFLOPS FP32, "
                      "2,039 GB/s HBM2e)"),
    "rtx-2080-ti": SpecSheet("NVIDIA GeForce RTX 2080 Ti", 13.45, 616, 11, "NVIDIA Turing whitepaper (13.4 TFLOPS "
                             "FP32, 616 GB/s GDDR6)"),
    "rtx-a6000": SpecSheet("NVIDIA RTX A6000", 38.7, 768, 48, "NVIDIA RTX A6000 datasheet (38.7 TFLOPS FP32, "
                           "768 GB/s GDDR6)"),
    "h100": SpecSheet("NVIDIA H100 SXM5 80GB", 66.9, 3350, 80, "NVIDIA H100 datasheet (SXM5: 66.9 TFLOPS FP32, "
                      "3.35 TB/s HBM3)"),
}
"""The spec sheets ``--device`` knows by name."""
