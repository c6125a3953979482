"""Dataset registry: ``dataset.name`` -> a loader returning :class:`GraphData`.

Real graphs load through the stock PyG (or OGB) classes. They never write into
``dataset.root``: the root's ``raw`` folders are linked into a mirror under the cache dir and
PyG processes (and, where the network allows, downloads) into that mirror. When files are
missing and cannot be fetched the loader raises :class:`DatasetUnavailable` naming the files,
the folder they were looked for in, and how to obtain them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

import torch

from gnntrain.data import synthetic
from gnntrain.data.graph_data import GraphData, coalesce_edges, random_split
from gnntrain.errors import ConfigError, DatasetUnavailable

Loader = Callable[[dict, Path], GraphData]

# Split used for graphs that ship without one (LINKX Facebook100 graphs), over labeled nodes.
UNSPLIT_FRACTIONS = (0.5, 0.25)


def _mirror(root: Path, cache_dir: Path) -> Path:
    """Link every ``raw`` folder under ``root`` into a writable mirror and return the mirror."""
    mirror = cache_dir / "pyg" / hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:12]
    mirror.mkdir(parents=True, exist_ok=True)
    if root.is_dir():
        for raw in root.rglob("raw"):
            link = mirror / raw.relative_to(root)
            if raw.is_dir() and not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(raw.resolve(), target_is_directory=True)
    return mirror


def _pyg_dataset(cfg: dict, cache_dir: Path, cls: Any, class_root: str, raw_rel: str,
                 **kwargs: Any) -> Any:
    """Instantiate PyG's ``cls(root=<mirror>/class_root, **kwargs)``.

    ``raw_rel`` is where the class keeps its raw files relative to its root; missing ones are
    reported relative to ``dataset.root``, where the user should put them.
    """
    root = Path(cfg["root"]).expanduser()
    class_dir = _mirror(root, cache_dir) / class_root
    probe = cls.__new__(cls)
    probe.__dict__.update(kwargs, root=str(class_dir))
    raw_files = probe.raw_file_names
    raw_files = [raw_files] if isinstance(raw_files, str) else list(raw_files)
    missing = [f for f in raw_files if not (class_dir / raw_rel / f).exists()]
    looked_in = root / class_root / raw_rel
    fetcher = f"torch_geometric.datasets.{cls.__name__}"
    if missing and not cfg["download"]:
        raise _unavailable(cfg["name"], missing, looked_in, fetcher, "dataset.download=false")
    try:
        return cls(root=str(class_dir), **kwargs)
    except Exception as exc:  # noqa: BLE001 - a failed download is reported as missing files
        if not missing:
            raise
        raise _unavailable(cfg["name"], missing, looked_in, fetcher, f"download failed: {exc}") from exc


def _unavailable(name: str, missing: list[str], looked_in: Path, fetcher: str, why: str) -> DatasetUnavailable:
    return DatasetUnavailable(
        f"dataset '{name}' is not available: missing {', '.join(missing)} in {looked_in} ({why}); "
        f"obtain them on a machine with network access with {fetcher} "
        f"and copy its folder under dataset.root (or set GNNTRAIN_DATA)"
    )


def _from_pyg(name: str, data: Any, cfg: dict, multilabel: bool = False,
              num_classes: int | None = None) -> GraphData:
    """Convert a PyG ``Data`` object; picks column ``dataset.split`` of multi-split masks."""
    n = data.num_nodes
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
            if not 0 <= cfg["split"] < count:
                raise ConfigError(f"dataset.split={cfg['split']} is out of range; {name} has splits 0..{count - 1}")
            masks = [m[:, cfg["split"]] for m in masks]
        masks = [m.bool() & labeled for m in masks]
    else:
        masks = list(random_split(labeled, *UNSPLIT_FRACTIONS, cfg["split_seed"]))
    edge_index = coalesce_edges(data.edge_index, n, symmetric=cfg["to_undirected"])
    if num_classes is None:
        num_classes = y.shape[1] if multilabel else int(y.max()) + 1
    return GraphData(name, data.x.float(), y, edge_index, *masks, num_classes, multilabel)


def _pyg(cls_name: str, class_root: str, raw_rel: str, multilabel: bool = False, **kwargs: Any) -> Loader:
    """A loader through ``torch_geometric.datasets.<cls_name>`` (see :func:`_pyg_dataset`)."""

    def load(cfg: dict, cache_dir: Path) -> GraphData:
        import torch_geometric.datasets as pyg_datasets

        ds = _pyg_dataset(cfg, cache_dir, getattr(pyg_datasets, cls_name), class_root, raw_rel, **kwargs)
        return _from_pyg(cfg["name"], ds[0], cfg, multilabel=multilabel)

    return load


OGB_RAW_FILES = ["edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz",
                 "num-edge-list.csv.gz", "num-node-list.csv.gz"]


def _ogb(ogb_name: str) -> Loader:
    def load(cfg: dict, cache_dir: Path) -> GraphData:
        folder = ogb_name.replace("-", "_")
        root = Path(cfg["root"]).expanduser()
        looked_in = root / folder / "raw"
        fetcher = f"ogb's PygNodePropPredDataset('{ogb_name}')"
        try:
            from ogb.nodeproppred import PygNodePropPredDataset
        except ImportError as exc:
            raise DatasetUnavailable(
                f"dataset '{cfg['name']}' needs the 'ogb' package (pip install 'gnntrain[ogb]'); "
                f"its files are looked for in {looked_in}") from exc
        mirror = _mirror(root, cache_dir)
        missing = [f for f in OGB_RAW_FILES if not (mirror / folder / "raw" / f).exists()]
        if missing and not cfg["download"]:
            raise _unavailable(cfg["name"], missing, looked_in, fetcher, "dataset.download=false")
        try:
            ds = PygNodePropPredDataset(ogb_name, root=str(mirror))
        except Exception as exc:  # noqa: BLE001
            if not missing:
                raise
            raise _unavailable(cfg["name"], missing, looked_in, fetcher, f"download failed: {exc}") from exc
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
        return _from_pyg(cfg["name"], data, cfg, num_classes=ds.num_classes)

    return load


def _synthetic(cfg: dict, cache_dir: Path) -> GraphData:
    return synthetic.generate(
        num_nodes=cfg["num_nodes"], avg_degree=cfg["avg_degree"], num_classes=cfg["num_classes"],
        num_features=cfg["num_features"], homophily=cfg["homophily"],
        degree_exponent=cfg["degree_exponent"], feature_noise=cfg["feature_noise"],
        graph_seed=cfg["graph_seed"], train_frac=cfg["train_frac"], val_frac=cfg["val_frac"],
        split_seed=cfg["split_seed"],
    )


DATASETS: dict[str, Loader] = {
    "synthetic": _synthetic,
    "cora": _pyg("Planetoid", "", "Cora/raw", name="Cora"),
    "citeseer": _pyg("Planetoid", "", "CiteSeer/raw", name="CiteSeer"),
    "squirrel": _pyg("WikipediaNetwork", "", "squirrel/geom_gcn/raw", name="squirrel", geom_gcn_preprocess=True),
    "amherst41": _pyg("LINKXDataset", "", "amherst41/raw", name="amherst41"),
    "reed98": _pyg("LINKXDataset", "", "reed98/raw", name="reed98"),
    "reddit": _pyg("Reddit", "Reddit", "raw"),
    "flickr": _pyg("Flickr", "Flickr", "raw"),
    "yelp": _pyg("Yelp", "Yelp", "raw", multilabel=True),
    "amazon-products": _pyg("AmazonProducts", "AmazonProducts", "raw", multilabel=True),
    "ogbn-arxiv": _ogb("ogbn-arxiv"),
    "ogbn-products": _ogb("ogbn-products"),
    "ogbn-papers100m": _ogb("ogbn-papers100M"),
}


def load_dataset(cfg: dict, cache_dir: str | Path) -> GraphData:
    """Load ``cfg['name']`` (a ``dataset`` config section as a plain dict)."""
    name = cfg["name"]
    if name not in DATASETS:
        raise ConfigError(f"unknown dataset.name '{name}'; valid: {', '.join(sorted(DATASETS))}")
    return DATASETS[name](cfg, Path(cache_dir).expanduser())
