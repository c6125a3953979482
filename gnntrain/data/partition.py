"""Node partitioning (METIS via pymetis, random, or a precomputed assignment file) with an
on-disk cache.

METIS runs in this one process on the whole graph: pymetis is built with 64-bit indices, so
the limit is memory, not index range. Its peak is measured by ``scripts/bench_parted.py``
(bytes per directed edge, in docs/clusters.md). A graph beyond one machine's memory is partitioned
elsewhere (e.g. ParMETIS, or any tool that writes a part id per node) and given as
``partition.assignment=path.npy``: a 1-D integer array of ``num_nodes`` part ids.

A partition is a ``[N]`` tensor of part ids. The cache file for (dataset, method, parts, seed)
stores it with a fingerprint of the graph it was computed on; a file that fails to load, has
the wrong shape or values, or whose fingerprint differs from the current graph (the dataset
changed) is named in a warning and rebuilt. A fresh partition is cached only after
:func:`check_partition` accepts it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pymetis
import torch

from gnntrain.storage.cache import cache_folder
from gnntrain.data.graph_data import GraphData, coalesce_edges
from gnntrain.errors import ConfigError, GnntrainError, first_line, warn
from gnntrain.storage.files import open_regular, write_atomically
from gnntrain.storage.process_folders import make_process_folder, remove_process_folder
from gnntrain.data.phases import phase
from gnntrain.storage.safe_load import UnsafeFile, load_plain

METHODS = ("metis", "metis-vol", "random")
"""Partitioners by cache name: METIS minimising the edge cut or the communication volume
(``partition.objective``), and a balanced random assignment."""
SETTINGS = {"metis": "partition.method=metis", "metis-vol": "partition.method=metis partition.objective=vol",
            "random": "partition.method=random"}
"""The settings that pick each partitioner, as errors name them."""


def graph_fingerprint(data: GraphData) -> str:
    """SHA-1 of the node count and the edge list: identifies the graph a partition belongs to."""
    h = hashlib.sha1(str(data.num_nodes).encode())
    h.update(data.edge_index.contiguous().numpy())
    return h.hexdigest()


def metis_partition(data: GraphData, parts: int, seed: int, objective: str = "cut",
                    spill_dir: Path | None = None) -> torch.Tensor:
    """Balanced METIS partition (3% imbalance) minimising ``objective``: ``cut``, the edges
    between parts (pymetis's default scheme: recursive bisection up to 8 parts, k-way beyond),
    or ``vol``, the total communication volume (per node, the number of other parts among its
    neighbours' parts: the halo rows an exchange moves), which only METIS's k-way scheme
    offers, so it always runs k-way (as DGL's METIS call does for the PipeGCN and BNS-GCN
    authors' ``--partition-obj vol``).

    METIS reads the symmetric graph as CSR. A graph whose edges are already that
    (``coalesced_undirected``) is handed over without a copy; with ``spill_dir`` it is also
    stripped to METIS's input while METIS runs, since METIS's own memory (about 70 bytes per
    directed edge with pymetis's 64-bit indices) is what bounds the graphs one machine can
    partition: the features wait in a file in ``spill_dir`` and the edges are held as METIS's
    CSR alone, their targets rebuilt from its row pointers afterwards (the same tensor values;
    ``data``'s fields are replaced)."""
    if not data.coalesced_undirected:
        edges = coalesce_edges(*data.edge_index, data.num_nodes, symmetric=True)
        return _metis(_row_pointers(edges[1], data.num_nodes), edges[0], parts, seed, objective)
    num_nodes = data.num_nodes
    row_pointers = _row_pointers(data.edge_index[1], num_nodes)
    if spill_dir is None:
        return _metis(row_pointers, data.edge_index[0], parts, seed, objective)
    folder = make_process_folder(spill_dir, SPILL_PREFIX)  # a killed run's spill (GBs) goes with the next
    try:
        features = folder / "x.pt"
        write_atomically(features, lambda f: torch.save(data.x, f))  # a full disk or a size limit: one line
        sources = data.edge_index[0].clone()
        data.x = data.edge_index = None
        part = _metis(row_pointers, sources, parts, seed, objective)
        targets = torch.repeat_interleave(torch.arange(num_nodes), row_pointers.diff())
        data.edge_index = torch.stack([sources, targets])
        del sources, targets
        data.x = torch.load(features, weights_only=True)
    finally:
        remove_process_folder(folder)
    return part


SPILL_PREFIX = "spill-"
"""A spill folder is ``spill-<pid>-<random>``: the process that made it
(:mod:`gnntrain.storage.process_folders`)."""


def _row_pointers(targets: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """CSR row pointers of edges sorted by target."""
    pointers = torch.zeros(num_nodes + 1, dtype=torch.long)
    pointers[1:] = torch.cumsum(torch.bincount(targets, minlength=num_nodes), 0)
    return pointers


def _metis(row_pointers: torch.Tensor, columns: torch.Tensor, parts: int, seed: int, objective: str) -> torch.Tensor:
    """pymetis's partition. METIS catches SIGTERM itself (GKlib's signal trap, which replaces
    Python's handler while it runs) and returns an error that pymetis raises as "Caught an
    unknown exception!"; that error ends the job in one line naming the causes it has, recorded
    in the run's summary, not with pymetis's traceback."""
    adjacency = pymetis.CSRAdjacency(row_pointers.numpy(), columns.numpy())
    try:
        if objective == "vol":
            options = pymetis.Options(seed=seed, objtype=int(pymetis.ObjType.VOL))
            _, membership = pymetis.part_graph(parts, adjacency, options=options, recursive=False)
        else:
            _, membership = pymetis.part_graph(parts, adjacency, options=pymetis.Options(seed=seed))
    except RuntimeError as exc:
        raise GnntrainError(f"METIS stopped without a partition ({first_line(exc)}): it does so when the job is "
                            "stopped while it runs (SIGTERM, which METIS catches itself) or when it runs out of "
                            "memory") from None
    return torch.as_tensor(np.asarray(membership), dtype=torch.long)


def random_partition(data: GraphData, parts: int, seed: int) -> torch.Tensor:
    """Balanced random assignment: a seeded permutation cut into ``parts`` equal slices."""
    perm = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(seed))
    part = torch.empty(data.num_nodes, dtype=torch.long)
    part[perm] = torch.arange(data.num_nodes) * parts // data.num_nodes
    return part


def assignment_digest(path: str | Path) -> str:
    """SHA-1 of an assignment file's bytes (it names the partition in caches and manifests)."""
    h = hashlib.sha1()
    try:
        with open_regular(Path(path).expanduser()) as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                h.update(block)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"partition.assignment={path} cannot be read ({getattr(exc, 'strerror', None) or exc}); "
                          "valid: a .npy file of one part id per node") from None
    return h.hexdigest()


def load_assignment(path: str | Path, data: GraphData, parts: int) -> torch.Tensor:
    """A precomputed partition: ``num_nodes`` integer part ids in ``0..parts-1`` from a .npy
    file, every part non-empty; else ConfigError naming the file and what is wrong."""
    try:
        array = np.load(Path(path).expanduser(), allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:  # EOFError: an empty file
        raise ConfigError(f"partition.assignment={path} is not a readable .npy file ({first_line(exc)})") from None
    if array.shape != (data.num_nodes,) or array.dtype.kind not in "iu":
        raise ConfigError(f"partition.assignment={path} holds a {array.dtype} array of shape {array.shape}; "
                          f"valid: integer part ids of shape ({data.num_nodes},), one per node of {data.name}")
    part = torch.as_tensor(array.astype(np.int64))
    check_partition(part, parts, f"partition.assignment={path}", data)
    return part


def compute_partition(data: GraphData, method: str, parts: int, seed: int,
                      spill_dir: Path | None = None) -> torch.Tensor:
    """Partition ``data`` by ``method`` (:data:`METHODS`); METIS spills to ``spill_dir``
    (:func:`metis_partition`)."""
    if parts == 1:
        return torch.zeros(data.num_nodes, dtype=torch.long)
    with phase(f"partition {data.name} into {parts} parts ({method})"):
        if method == "random":
            return random_partition(data, parts, seed)
        return metis_partition(data, parts, seed, "vol" if method == "metis-vol" else "cut", spill_dir)


def check_partition(part: torch.Tensor, parts: int, source: str, data: GraphData) -> None:
    """Every node in a part ``0..parts-1`` and no part empty; else ConfigError naming ``source``
    (the setting that made the partition), before it is cached."""
    if part.shape != (data.num_nodes,) or bool(((part < 0) | (part >= parts)).any()):
        raise ConfigError(f"{source} gave part ids outside 0..{parts - 1} for {data.name}; the partition was not used")
    empty = (torch.bincount(part, minlength=parts) == 0).nonzero().view(-1).tolist()
    if empty:
        shown = ", ".join(map(str, empty[:8])) + (", ..." if len(empty) > 8 else "")
        raise ConfigError(f"{source} left {len(empty)} of {parts} parts of {data.name} "
                          f"({data.num_nodes} nodes) empty (parts {shown}); valid: fewer parts (workers), or "
                          "partition.method=random partition.objective=cut (never empty up to one part per node)")


def _problem(entry: object, data: GraphData, parts: int, fingerprint: str) -> str | None:
    """Why a loaded cache entry cannot serve this graph, or None."""
    if not isinstance(entry, dict) or not isinstance(entry.get("part"), torch.Tensor):
        return "does not hold a partition"
    if entry.get("fingerprint") != fingerprint:
        return "holds a partition of another graph (the dataset changed)"
    part = entry["part"]
    if part.shape != (data.num_nodes,) or part.dtype != torch.long or not bool(((part >= 0) & (part < parts)).all()):
        return f"holds part ids outside 0..{parts - 1}"
    return None


def cache_path(cache_dir: str | Path, dataset_key: str, method: str, parts: int, seed: int) -> Path:
    """Where the partition of the dataset ``dataset_key`` by ``method`` into ``parts`` parts
    with ``seed`` is cached."""
    return cache_folder(cache_dir, "partitions") / f"{dataset_key}-{method}-{parts}-s{seed}.pt"


def load_or_partition(data: GraphData, dataset_key: str, method: str, parts: int, seed: int,
                      cache_dir: str | Path) -> tuple[torch.Tensor, bool]:
    """The cached partition if it is valid for this graph, else a fresh one (then cached).

    Returns ``(part, from_cache)``. The file is written atomically, so concurrent workers
    (e.g. every rank under torchrun) can race safely.
    """
    if method not in METHODS:
        raise ValueError(f"unknown partition method {method!r}; valid: {', '.join(METHODS)}")
    path = cache_path(cache_dir, dataset_key, method, parts, seed)
    folder = path.parent
    fingerprint = graph_fingerprint(data)
    if path.exists():
        try:
            entry = load_plain(path)
            problem = _problem(entry, data, parts, fingerprint)
        except UnsafeFile:
            raise
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a corrupt cache
            problem = f"could not be read ({first_line(exc)})"
        if problem is None:
            return entry["part"], True
        warn(f"cache file {path} {problem}; computing the partition again")
    part = compute_partition(data, method, parts, seed, folder)
    check_partition(part, parts, SETTINGS[method], data)
    write_atomically(path, lambda f: torch.save({"part": part, "fingerprint": fingerprint}, f))
    return part, False


def narrow_owners(part: torch.Tensor, parts: int) -> torch.Tensor:
    """``part`` in the narrowest integer type that holds ``parts`` ids: looked up once per
    edge, it costs 2 bytes per directed edge instead of 8 on paper-size graphs."""
    return part.to(torch.int16 if parts <= torch.iinfo(torch.int16).max else torch.int32)


def carve_part(data: GraphData, part: torch.Tensor, rank: int, world_size: int) -> dict:
    """Rank ``rank``'s share of the whole graph, as a partitioned dataset's part file stores
    it: the fields of its :class:`~gnntrain.data.local_graph.LocalGraph` (local ids, halo order and send
    plan as that module describes), with the global in-degrees as counts and the features in
    the dataset's dtype. The halo's owners are the ranks of ``recv_splits``' blocks (the halo is
    grouped by owner)."""
    n = data.num_nodes
    src, dst = data.edge_index
    owner = narrow_owners(part, world_size)
    src_owner, dst_owner = owner[src], owner[dst]
    inner = (part == rank).nonzero().view(-1)

    into_inner = dst_owner == rank
    e_src, e_dst = src[into_inner], dst[into_inner]
    remote = src_owner[into_inner] != rank
    halo_key = torch.unique(part[e_src[remote]] * n + e_src[remote])
    halo = halo_key % n
    del remote, into_inner

    local_id = torch.full((n,), -1, dtype=torch.long)
    local_id[inner] = torch.arange(inner.numel())
    local_id[halo] = torch.arange(halo.numel()) + inner.numel()

    out_of_inner = (src_owner == rank) & (dst_owner != rank)
    del src_owner, dst_owner
    send_key = torch.unique(part[dst[out_of_inner]] * n + src[out_of_inner])
    send_peer, send_global = send_key // n, send_key % n

    global_ids = torch.cat([inner, halo])
    return {
        "rank": rank,
        "world_size": world_size,
        "num_inner": inner.numel(),
        "num_halo": halo.numel(),
        "global_ids": global_ids,
        "in_degree": torch.bincount(dst, minlength=n)[global_ids],
        "edge_src": local_id[e_src],
        "edge_dst": local_id[e_dst],
        "recv_splits": torch.bincount(halo_key // n, minlength=world_size).tolist(),
        "send_index": local_id[send_global],
        "send_splits": torch.bincount(send_peer, minlength=world_size).tolist(),
        "x": data.x[inner],
        "y": data.y[inner],
        "train_mask": data.train_mask[inner],
        "val_mask": data.val_mask[inner],
        "test_mask": data.test_mask[inner],
    }


def partition_stats(data: GraphData, part: torch.Tensor, parts: int) -> dict:
    """Inner, boundary (halo), marginal and training node counts, in-edges of inner nodes
    (``inner_edges``) and rows sent to peers by one halo exchange (``sent_rows``: a part's inner
    rows, once for each other part that reads them), per part; edge-cut, replication factor.

    A part's *marginal* nodes are its inner nodes with an in-neighbour in another part (AdaQP's
    term; the rest are *central* and need no halo row).

    ``edge_cut`` counts directed edges whose endpoints lie in different parts (for an undirected
    graph, twice the undirected cut); ``replication_factor`` is (inner + halo rows over all
    parts) / N, i.e. how many copies of a node's features exist on average.
    """
    n = data.num_nodes
    src, dst = data.edge_index
    owner = narrow_owners(part, parts)
    cut = owner[src] != owner[dst]
    halo_pairs = torch.unique(part[dst[cut]] * n + src[cut])
    halo = torch.bincount(halo_pairs // n, minlength=parts)
    inner = torch.bincount(part, minlength=parts)
    inner_edges = torch.zeros(parts, dtype=torch.long).index_add_(0, part, torch.bincount(dst, minlength=n))
    marginal = torch.zeros(n, dtype=torch.bool)
    marginal[dst[cut]] = True
    return {
        "parts": parts,
        "inner_nodes": inner.tolist(),
        "inner_edges": inner_edges.tolist(),
        "boundary_nodes": halo.tolist(),
        "sent_rows": torch.bincount(part[halo_pairs % n], minlength=parts).tolist(),
        "marginal_nodes": torch.bincount(part[marginal], minlength=parts).tolist(),
        "train_nodes": torch.bincount(part[data.train_mask], minlength=parts).tolist(),
        "edge_cut": int(cut.sum()),
        "edge_cut_fraction": int(cut.sum()) / cut.numel() if cut.numel() else 0.0,
        "replication_factor": float((inner.sum() + halo.sum()) / max(n, 1)),
    }


def comm_volume(stats: dict) -> int:
    """The halo rows of all parts of a :func:`partition_stats`: the rows one exchange moves,
    METIS's total communication volume (what ``partition.objective=vol`` minimises)."""
    return sum(stats["boundary_nodes"])
