"""A partitioned dataset on disk: the graph cut once into per-part files, so that each rank of
a job loads only its own part and its peak memory follows the part, not the graph.

A folder holds ``manifest.json`` and one ``part<k>.pt`` per part. Each part file is rank
``k``'s share as :func:`gnntrain.data.partition.carve_part` computes it: the inner nodes' global ids,
features, labels and masks; the halo's global ids, grouped by owner (``recv_splits`` gives the
owners); the local CSR (``edge_src``, ``edge_dst``: the in-edges of the inner nodes in local
ids); the global in-degrees of the local nodes; and the send plan. The manifest holds the
format version, the graph's facts (:class:`~gnntrain.data.graph_data.GraphFacts`), its
fingerprint, the partition that cut it (dataset key, method, parts, seed, assignment file
digest) and the partition's statistics. It is written last, so a folder without one is
incomplete. Every file is written atomically (:func:`gnntrain.storage.files.write_atomically`).

A run finds the folder for its (dataset, method, parts, seed) in the cache, or at
``partition.dir``; a rank can then check the manifest against its config but not the graph's
fingerprint (that would need the whole graph): a dataset whose files changed needs its
partitioned copy written again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import torch

from gnntrain.data.graph_data import GraphFacts
from gnntrain.errors import ConfigError, first_line
from gnntrain.storage.files import write_atomically
from gnntrain.data.phases import phase
from gnntrain.storage.safe_load import UnsafeFile, load_plain, names_code

FORMAT_VERSION = 1
MANIFEST = "manifest.json"


def part_file(folder: Path, rank: int) -> Path:
    return folder / f"part{rank}.pt"


@dataclass
class PartedDataset:
    """A complete partitioned dataset: its folder and manifest."""

    folder: Path
    manifest: dict

    @property
    def facts(self) -> GraphFacts:
        return GraphFacts(**self.manifest["graph"])

    @property
    def stats(self) -> dict:
        return self.manifest["stats"]

    @classmethod
    def find(cls, folder: Path) -> PartedDataset | None:
        """The dataset in ``folder``, or None where it has no manifest (absent or incomplete)."""
        path = folder / MANIFEST
        if not path.exists():
            return None
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"partitioned dataset manifest {path} is unreadable ({first_line(exc)}); "
                              "write it again with gnntrain-partition") from None
        if manifest.get("format") != FORMAT_VERSION:
            raise ConfigError(f"partitioned dataset {folder} has format {manifest.get('format')}; this gnntrain reads "
                              f"format {FORMAT_VERSION}: write it again with gnntrain-partition")
        sizes = manifest.get("sizes") or {}
        for rank in range(int(manifest.get("partition", {}).get("parts", 0))):
            path = part_file(folder, rank)
            _refuse_irregular(path)
            _refuse_code(path)
            _refuse_resized(path, sizes.get(str(rank)))
        return cls(folder, manifest)

    def check(self, partition: dict) -> None:
        """Refuse in one line a dataset cut from another dataset config or by another partition."""
        for key, want in partition.items():
            have = self.manifest["partition"].get(key)
            if have != want:
                raise ConfigError(f"partitioned dataset {self.folder} has {key}={have}, but this run needs "
                                  f"{key}={want}; write one for this run with gnntrain-partition (same overrides)")

    def load_part(self, rank: int) -> dict:
        """Rank ``rank``'s part file (its tensors memory-mapped from the file)."""
        path = part_file(self.folder, rank)
        try:
            return load_plain(path, mmap=True)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a broken dataset
            raise ConfigError(f"part file {path} is unreadable ({first_line(exc)}); "
                              "write the partitioned dataset again with gnntrain-partition") from None


def write_parted(folder: Path, facts: GraphFacts, spec: dict, fingerprint: str, stats: dict,
                 parts: Iterable[dict]) -> PartedDataset:
    """Write the part files, one at a time as ``parts`` yields them, then the manifest
    (:class:`PartedDataset`'s layout)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)
    sizes = {}
    with phase(f"write {spec['parts']} part files to {folder}", total=spec["parts"]) as progress:
        for rank, fields in enumerate(parts):
            write_atomically(part_file(folder, rank), lambda f, fields=fields: torch.save(fields, f))
            sizes[str(rank)] = part_file(folder, rank).stat().st_size
            progress.advance()
    manifest = {"format": FORMAT_VERSION, "graph": asdict(facts), "fingerprint": fingerprint,
                "partition": spec, "stats": stats, "sizes": sizes}
    write_atomically(folder / MANIFEST, json.dumps(manifest, indent=1))
    return PartedDataset(folder, manifest)


def _refuse_irregular(path: Path) -> None:
    """Refuse a part file that is not a regular file (a FIFO or a device would block or never
    end a read), before anything reads it."""
    if path.exists() and not path.is_file():
        raise ConfigError(f"part file {path} is not a regular file; write the partitioned dataset again with "
                          "gnntrain-partition")


def _refuse_resized(path: Path, size: int | None) -> None:
    """Refuse, before any rank opens it, a part file whose size is not the one written (``size``,
    from the manifest; absent in manifests written before it was kept): a damaged, emptied or
    swapped file."""
    if size is not None and path.is_file() and path.stat().st_size != size:
        raise ConfigError(f"part file {path} has {path.stat().st_size} bytes but {size} were written: it was damaged, "
                          "emptied or swapped; write the partitioned dataset again with gnntrain-partition")


def _refuse_code(path: Path) -> None:
    """Refuse a part file whose pickle names code, before any rank loads it
    (:mod:`gnntrain.storage.safe_load`); a missing or damaged one is reported by the rank that reads it."""
    try:
        code = names_code(path)
    except Exception:  # noqa: BLE001 - damage is the loading rank's to report
        return
    if code is not None:
        raise UnsafeFile(path, code)
