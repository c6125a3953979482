"""The built-in dataset sources' loaders (their declarations: :mod:`gnntrain.data.sources`): every
graph is declared by a YAML in the ``dataset`` config group (the built-in ones in ``conf/dataset``),
naming its source and that source's keys:

* ``pyg``: ``torch_geometric.datasets.<pyg_class>(root, **args)``;
* ``ogb``: OGB's ``PygNodePropPredDataset(ogb_name)``;
* ``file``: a ``.npz`` or ``.pt`` of arrays (:func:`load_file` says which);
* ``synthetic``: the planted-community generator.

Real graphs never write into ``dataset.root``: the root's ``raw`` folders are linked into a
mirror under the cache dir and PyG processes (and, where the network allows, downloads) into
that mirror. When files are missing and cannot be fetched the loader raises
:class:`DatasetUnavailable` naming the files, the folder they were looked for in, and how to
obtain them. A processed cache file that cannot be read is named in a warning, deleted and
rebuilt from the raw files.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnntrain.storage.cache import cache_folder
from gnntrain.config.schema import DatasetConfig, SyntheticConfig
from gnntrain.data import synthetic
from gnntrain.data.graph_checks import check_arrays, check_split
from gnntrain.data.sources import dataset_file, dataset_source
from gnntrain.data.graph_data import GraphData, coalesce_edges, random_split
from gnntrain.errors import ConfigError, DatasetUnavailable, GnntrainError, first_line, warn
from gnntrain.storage.safe_load import UnsafeFile, load_plain, names_code

# Split used for graphs that ship without one (LINKX Facebook100 graphs, user files without
# masks), over labeled nodes.
UNSPLIT_FRACTIONS = (0.5, 0.25)

FILE_ARRAYS = "edge_index [2, E], x [N, F], y [N] (or [N, C] with dataset.multilabel=true)"
FILE_MASKS = ("train_mask", "val_mask", "test_mask")


def _mirror(root: Path, cache_dir: Path) -> Path:
    """Link every ``raw`` folder under ``root`` into a writable mirror and return the mirror."""
    mirror = cache_folder(cache_dir, "pyg") / hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:12]
    mirror.mkdir(parents=True, exist_ok=True)
    if root.is_dir():
        for raw in root.rglob("raw"):
            link = mirror / raw.relative_to(root)
            if raw.is_dir() and not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(raw.resolve(), target_is_directory=True)
    return mirror


def _pyg_dataset(dataset: DatasetConfig, cache_dir: Path, cls: Any) -> Any:
    """Instantiate ``cls(root=<mirror>/<dataset.folder>, **dataset.args)``; missing raw files are
    reported relative to ``dataset.root``, where the user should put them."""
    root = Path(dataset.root).expanduser()
    class_dir = _mirror(root, cache_dir) / dataset.folder
    kwargs = dict(dataset.args)
    probe = _probe(cls, class_dir, kwargs)
    raw_dir = Path(probe.raw_dir)
    raw_files = probe.raw_file_names
    raw_files = [raw_files] if isinstance(raw_files, str) else list(raw_files)
    missing = [f for f in raw_files if not (raw_dir / f).exists()]
    looked_in = root / dataset.folder / raw_dir.relative_to(class_dir)
    fetcher = f"torch_geometric.datasets.{cls.__name__}"
    if missing and not dataset.download:
        raise _unavailable(dataset.name, missing, looked_in, fetcher, "dataset.download=false")
    _distrust_processed(Path(probe.processed_dir))
    try:
        return cls(root=str(class_dir), **kwargs)
    except Exception as exc:  # noqa: BLE001 - reported in one line below
        if missing:
            raise _unavailable(dataset.name, missing, looked_in, fetcher, f"download failed: {exc}") from exc
        if not _drop_unreadable([Path(p) for p in probe.processed_paths], exc):
            raise GnntrainError(f"dataset '{dataset.name}': {fetcher}({_call_args(kwargs)}) failed on the files "
                                f"in {looked_in}: {first_line(exc)}") from exc
    return cls(root=str(class_dir), **kwargs)


def _probe(cls: Any, class_dir: Path, kwargs: dict) -> Any:
    """An uninitialised ``cls`` carrying its constructor's arguments, enough to ask where its raw
    and processed files are without reading or downloading anything."""
    try:
        bound = inspect.signature(cls.__init__).bind(None, root=str(class_dir), **kwargs)
    except TypeError as exc:
        raise ConfigError(f"dataset.args={kwargs} do not fit torch_geometric.datasets.{cls.__name__}: {exc}") from None
    bound.apply_defaults()
    probe = cls.__new__(cls)
    probe.__dict__.update(list(bound.arguments.items())[1:])
    return probe


def _distrust_processed(processed_dir: Path) -> None:
    """Make a processed folder safe for PyG and OGB to read: their loaders fall back to the
    unrestricted unpickler (PyG's ``fs.torch_load``) or use it outright (the
    ``pre_transform.pt`` and ``pre_filter.pt`` records). The records are removed (they feed only
    a warning of PyG's and are written again when it processes), and a processed file whose
    pickle names code or cannot be read is named in a warning and removed, to be rebuilt from the
    raw files (:mod:`gnntrain.storage.safe_load`)."""
    for record in ("pre_transform.pt", "pre_filter.pt"):
        (processed_dir / record).unlink(missing_ok=True)
    for path in sorted(processed_dir.glob("*.pt")):
        try:
            code = names_code(path)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a corrupt cache
            why = f"could not be read ({first_line(exc)})"
        else:
            if code is None:
                continue
            why = f"names {code}, beyond tensors and plain data"
        warn(f"cache file {path} {why}; rebuilding it from the raw files")
        path.unlink()


def _drop_unreadable(paths: list[Path], exc: Exception) -> bool:
    """Delete the cache files among ``paths`` that the restricted unpickler cannot load, each
    named in a warning; whether there was one."""
    dropped = False
    for path in paths:
        try:
            if path.exists():
                load_plain(path)
        except Exception:  # noqa: BLE001 - any unreadable file is a corrupt cache
            warn(f"cache file {path} could not be read ({first_line(exc)}); rebuilding it from the raw files")
            path.unlink()
            dropped = True
    return dropped


def _call_args(kwargs: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def _unavailable(name: str, missing: list[str], looked_in: Path, fetcher: str, why: str) -> DatasetUnavailable:
    return DatasetUnavailable(
        f"dataset '{name}' is not available: missing {', '.join(missing)} in {looked_in} ({why}); "
        f"obtain them on a machine with network access with {fetcher} "
        f"and copy its folder under dataset.root (or set GNNTRAIN_DATA)"
    )


def _graph_data(dataset: DatasetConfig, data: Any, num_classes: int | None = None) -> GraphData:
    """A :class:`GraphData` from anything with PyG ``Data``'s fields (``x``, ``y``,
    ``edge_index``, optional masks); picks column ``dataset.split`` of multi-split masks and
    splits graphs without masks at random over their labeled nodes."""
    name, multilabel = dataset.name, dataset.multilabel
    check_arrays(name, data, multilabel, num_classes)
    n = data.x.shape[0]
    y = data.y
    if multilabel:
        y = y.float()
        labeled = torch.ones(n, dtype=torch.bool)
    else:
        y = y.view(-1).long()
        labeled = y >= 0
    if getattr(data, "train_mask", None) is not None:
        masks = [data.train_mask, data.val_mask, data.test_mask]
        if masks[0].dim() == 2:
            count = masks[0].shape[1]
            if not 0 <= dataset.split < count:
                raise ConfigError(f"dataset.split={dataset.split} is out of range; {name} has splits 0..{count - 1}")
            masks = [m[:, dataset.split] for m in masks]
        masks = [m.bool() & labeled for m in masks]
    else:
        masks = list(random_split(labeled, *UNSPLIT_FRACTIONS, dataset.split_seed))
    check_split(name, masks[0])
    edge_index = coalesce_edges(*data.edge_index.long(), n, symmetric=dataset.to_undirected)
    if num_classes is None:
        num_classes = y.shape[1] if multilabel else int(y.max()) + 1
    return GraphData(name, data.x.float(), y, edge_index, *masks, num_classes, multilabel, dataset.to_undirected)


def load_pyg(dataset: DatasetConfig, cache_dir: Path) -> GraphData:
    """``source: pyg``: ``torch_geometric.datasets.<pyg_class>`` (see :func:`_pyg_dataset`)."""
    import torch_geometric.datasets as pyg_datasets

    ds = _pyg_dataset(dataset, cache_dir, getattr(pyg_datasets, dataset.pyg_class))
    return _graph_data(dataset, ds[0])


OGB_SPLIT_FILES = ("train.csv.gz", "valid.csv.gz", "test.csv.gz")


def ogb_meta(ogb_name: str) -> dict:
    """OGB's own description of a node-property dataset (its ``master.csv`` column)."""
    import pandas as pd
    from ogb import nodeproppred

    master = pd.read_csv(Path(nodeproppred.__file__).parent / "master.csv", index_col=0, keep_default_na=False)
    if ogb_name not in master:
        raise ConfigError(f"dataset.ogb_name={ogb_name} is not an OGB node-property dataset; "
                          f"valid: {', '.join(master.columns)}")
    return master[ogb_name].to_dict()


def ogb_raw_files(meta: dict) -> list[str]:
    """The files under ``raw/`` that OGB's ``PygNodePropPredDataset.process`` reads for a
    homogeneous dataset: the graph in binary (``data.npz``: ogbn-papers100M) or as CSVs (edges,
    counts, features, the additional node and edge files such as ``node_year``), and the labels."""
    if meta["binary"] == "True":
        return ["data.npz", "node-label.npz"]
    names = ["edge", "num-node-list", "num-edge-list", "node-label"]
    names += [kind for kind, key in (("node-feat", "has_node_attr"), ("edge-feat", "has_edge_attr"))
              if meta[key] == "True"]
    for key in ("additional node files", "additional edge files"):
        names += [name for name in meta[key].split(",") if name != "None"]
    return [f"{name}.csv.gz" for name in names]


@contextmanager
def ogb_loading(download: bool) -> Iterator[None]:
    """OGB's loader fit for a batch job and for files from elsewhere. It asks on stdin before a
    download of more than 1 GB, which a batch job cannot answer: ``dataset.download`` is the
    answer, and any other question it would put is refused in one line instead of waiting on a
    stdin nobody reads. Its processed file is read as weights only with PyG's data classes
    allowed (torch refuses them by default, and a full unpickling could run code a file carries)."""
    from ogb.nodeproppred import dataset_pyg
    from torch_geometric.data.data import Data, DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    def refuse(prompt: str = "") -> str:
        raise GnntrainError(f"OGB asked {prompt.strip()!r} on stdin; gnntrain answers no question on stdin")

    saved = dataset_pyg.decide_download
    dataset_pyg.decide_download = lambda url: download
    dataset_pyg.input = refuse
    try:
        # only those not allowed already: leaving the context disallows what it allowed, PyG's own
        # registrations included, and PyG would then fall back to the unrestricted unpickler
        allowed = torch.serialization.get_safe_globals()
        with torch.serialization.safe_globals([g for g in (Data, DataEdgeAttr, DataTensorAttr, GlobalStorage)
                                               if g not in allowed]):
            yield
    finally:
        dataset_pyg.decide_download = saved
        del dataset_pyg.input


def _ogb_mirror(root: Path, cache_dir: Path, folder: str, meta: dict) -> Path:
    """The writable mirror of ``root`` with the dataset's split folder linked beside its ``raw``
    folder and OGB's release marker present: a copied dataset folder has no marker, and OGB
    then asks on stdin whether to delete it."""
    mirror = _mirror(root, cache_dir)
    split = root / folder / "split"
    if split.is_dir() and not (mirror / folder / "split").exists():
        (mirror / folder).mkdir(parents=True, exist_ok=True)
        (mirror / folder / "split").symlink_to(split.resolve(), target_is_directory=True)
    if (mirror / folder).is_dir():
        (mirror / folder / f"RELEASE_v{meta['version']}.txt").touch()
    return mirror


def load_ogb(dataset: DatasetConfig, cache_dir: Path) -> GraphData:
    """``source: ogb``: OGB's ``PygNodePropPredDataset(ogb_name)`` with its official split. It
    never asks on stdin (:func:`ogb_loading`): ``dataset.download`` decides downloads."""
    ogb_name = dataset.ogb_name
    folder = ogb_name.replace("-", "_")
    root = Path(dataset.root).expanduser()
    looked_in = root / folder / "raw"
    fetcher = f"ogb's PygNodePropPredDataset('{ogb_name}')"
    try:
        from ogb.nodeproppred import PygNodePropPredDataset
    except ImportError as exc:
        raise DatasetUnavailable(
            f"dataset '{dataset.name}' needs the 'ogb' package (make install, or pip install 'gnntrain[ogb]'); "
            f"its files are looked for in {looked_in}") from exc
    meta = ogb_meta(ogb_name)
    mirror = _ogb_mirror(root, cache_dir, folder, meta)
    split_dir = mirror / folder / "split" / meta["split"]
    missing = [f for f in ogb_raw_files(meta) if not (mirror / folder / "raw" / f).exists()]
    missing += [f"split/{meta['split']}/{f}" for f in OGB_SPLIT_FILES if not (split_dir / f).exists()]
    if missing and not dataset.download:
        raise _unavailable(dataset.name, missing, looked_in, fetcher, "dataset.download=false")
    with ogb_loading(dataset.download):
        _distrust_processed(mirror / folder / "processed")  # OGB's Data classes count as plain here
        try:
            ds = PygNodePropPredDataset(ogb_name, root=str(mirror))
        except GnntrainError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported in one line below
            if missing:
                raise _unavailable(dataset.name, missing, looked_in, fetcher, f"download failed: {exc}") from exc
            if not _drop_unreadable(sorted((mirror / folder / "processed").glob("*.pt")), exc):
                raise GnntrainError(f"dataset '{dataset.name}': {fetcher} failed on the files in {looked_in}: "
                                    f"{first_line(exc)}") from exc
            ds = PygNodePropPredDataset(ogb_name, root=str(mirror))
    data = ds[0]
    split = ds.get_idx_split()
    n = data.num_nodes
    y = data.y.view(-1)
    y = torch.where(torch.isnan(y.float()), -1, y).long() if y.is_floating_point() else y
    masks = []
    for key in ("train", "valid", "test"):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[split[key]] = True
        masks.append(mask)
    data.y = y
    data.train_mask, data.val_mask, data.test_mask = masks
    return _graph_data(dataset, data, num_classes=ds.num_classes)


def load_file(dataset: DatasetConfig, cache_dir: Path) -> GraphData:
    """``source: file``: a ``.npz`` (numpy arrays) or ``.pt`` (a dict of tensors) holding
    ``edge_index`` [2, E] (sources, then targets), ``x`` [N, F], ``y`` [N] (class ids, -1 for
    unlabeled; [N, C] 0/1 with ``multilabel``) and optionally ``train_mask``, ``val_mask``,
    ``test_mask`` ([N] or [N, splits] booleans; without them, a seeded 50/25/25 split)."""
    path = dataset_file(dataset)
    if not path.is_file():
        raise DatasetUnavailable(f"dataset '{dataset.name}': dataset.file {path} does not exist")
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as arrays:
                tensors = {key: torch.from_numpy(arrays[key]) for key in arrays.files}
        else:
            tensors = dict(load_plain(path))
    except UnsafeFile:
        raise
    except Exception as exc:  # noqa: BLE001 - any unreadable file is reported in one line
        raise GnntrainError(f"dataset '{dataset.name}': cannot read {path}: {first_line(exc)}") from exc
    sparse = [f"{key} ({value.layout})" for key, value in tensors.items()
              if isinstance(value, torch.Tensor) and value.layout != torch.strided]
    if sparse:
        raise GnntrainError(f"dataset '{dataset.name}': {path} holds {', '.join(sparse)}; valid: dense arrays "
                            "(tensor.to_dense())")
    lacking = [key for key in ("edge_index", "x", "y") if key not in tensors]
    if lacking:
        raise GnntrainError(f"dataset '{dataset.name}': {path} lacks {', '.join(lacking)}; it must hold "
                            f"{FILE_ARRAYS} and optionally {', '.join(FILE_MASKS)}")
    present = [key for key in FILE_MASKS if key in tensors]
    if present and len(present) < len(FILE_MASKS):
        raise GnntrainError(f"dataset '{dataset.name}': {path} has {', '.join(present)} but not all of "
                            f"{', '.join(FILE_MASKS)}; give all three or none (a random split)")
    graph = type("FileGraph", (), {key: None for key in FILE_MASKS})()
    graph.__dict__.update(tensors)
    return _graph_data(dataset, graph)


def load_synthetic(dataset: SyntheticConfig, cache_dir: Path) -> GraphData:
    """``source: synthetic``: the planted-community generator (:mod:`gnntrain.data.synthetic`)."""
    data = synthetic.generate(
        num_nodes=dataset.num_nodes, avg_degree=dataset.avg_degree, num_classes=dataset.num_classes,
        num_features=dataset.num_features, homophily=dataset.homophily,
        degree_exponent=dataset.degree_exponent, feature_noise=dataset.feature_noise,
        graph_seed=dataset.graph_seed, train_frac=dataset.train_frac, val_frac=dataset.val_frac,
        split_seed=dataset.split_seed,
    )
    data.name = dataset.name
    return data


def row_normalized(x: torch.Tensor) -> torch.Tensor:
    """Each row of ``x`` divided by its sum, rows summing to 0 left as they are: the feature
    normalisation of the GCN and GAT papers (Kipf & Welling's ``preprocess_features``), the same
    as PyG's ``NormalizeFeatures`` on non-negative features such as bag-of-words."""
    sums = x.sum(dim=1, keepdim=True)
    return x / torch.where(sums == 0, torch.ones_like(sums), sums)


def load_dataset(dataset: DatasetConfig, cache_dir: str | Path) -> GraphData:
    """Load the graph the typed ``dataset`` config section declares with its source's loader
    (:mod:`gnntrain.data.sources`), its features row-normalised where ``dataset.normalize_features``."""
    source = dataset_source(dataset.source)
    source.check(dataset)
    data = source.loader()(dataset, Path(cache_dir).expanduser())
    return replace(data, x=row_normalized(data.x)) if dataset.normalize_features else data
