"""Checkpoints of a run and resuming from them (``train.checkpoint_every``, ``train.resume``).

Layout under the run dir: ``checkpoints/epoch_<NNNNNN>/rank<r>.pt``, one file per rank, and
``manifest.json``, written by rank 0 once every rank's file is on disk; a checkpoint without
its manifest is incomplete and never resumed from. Every file is written under a temporary
name, flushed to disk (fsync) and renamed, so a crash never leaves half a file under the final
name. The two newest complete checkpoints are kept.

A rank's file holds the strategy's state (model, optimizer and the method's own: stale halos
and their averages, samplers, bit plans and traces, generators), the global generators (torch,
CUDA, numpy, python) and the epoch. The manifest holds the epoch, the world size, the W&B run
id and the config the run trained with. Resuming requires the same config except the keys of
:data:`FREE_ON_RESUME` (more epochs, another run dir, ...): anything else is refused in one
line naming the first key that differs.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gnntrain.config import flatten
from gnntrain.config.keys import keys_playing, plays
from gnntrain.config.schema import CONDUCT, PLACE, RootConfig
from gnntrain.config.typed import plain
from gnntrain.engine.metrics import EpochRecord, read_records
from gnntrain.errors import ConfigError, first_line
from gnntrain.storage.files import write_atomically
from gnntrain.storage.safe_load import UnsafeFile, load_plain, names_code

FORMAT = 2
"""2: generator states as tensors and plain data, loaded with the restricted unpickler."""
KEEP = 2
"""Complete checkpoints kept per run (the newest)."""
FREE_ON_RESUME = keys_playing(PLACE, CONDUCT)
"""Config keys a resumed run may change, the place and conduct keys of the schemas: none of them
alters what an epoch computes."""


def rng_state() -> dict[str, Any]:
    """The global generators' states as tensors and plain data (numpy's array as a tensor), so
    that the file loads with the restricted unpickler (:mod:`gnntrain.storage.safe_load`)."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    numpy = {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position),
             "has_gauss": int(has_gauss), "gauss": float(gauss)}
    return {"torch": torch.get_rng_state(), "numpy": numpy, "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    numpy = state["numpy"]
    np.random.set_state((numpy["kind"], numpy["keys"].numpy().astype(np.uint32), numpy["position"],
                         numpy["has_gauss"], numpy["gauss"]))
    random.setstate(state["python"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _epoch_dir(root: Path, epoch: int) -> Path:
    return root / "checkpoints" / f"epoch_{epoch:06d}"


def _trained_config(run: RootConfig) -> dict:
    return {k: v for k, v in flatten(plain(run)).items() if not plays(k, FREE_ON_RESUME)}


def save(run_dir: Path, epoch: int, rank: int, world_size: int, state: dict, run: RootConfig,
         wandb_id: str | None) -> None:
    """Every rank calls this after epoch ``epoch``; returns once the checkpoint is complete."""
    where = _epoch_dir(run_dir, epoch)
    where.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "epoch": epoch, "rank": rank, "rng": rng_state(), "strategy": state}
    write_atomically(where / f"rank{rank}.pt", lambda f: torch.save(payload, f))
    if dist.is_initialized():
        dist.barrier()
    if rank == 0:
        manifest = {"format": FORMAT, "epoch": epoch, "world_size": world_size, "wandb_id": wandb_id,
                    "config": _trained_config(run)}
        write_atomically(where / "manifest.json", json.dumps(manifest, indent=1))
        for old in complete(run_dir)[:-KEEP]:
            shutil.rmtree(old, ignore_errors=True)


def discard_incomplete(run_dir: Path) -> None:
    """Remove the checkpoints under ``run_dir`` that lack their manifest (a write the run did not
    finish): never resumed from, they only hold space."""
    for where in (run_dir / "checkpoints").glob("epoch_*"):
        if not (where / "manifest.json").exists():
            shutil.rmtree(where, ignore_errors=True)


def complete(run_dir: Path) -> list[Path]:
    """The complete checkpoints under ``run_dir``, oldest first."""
    root = run_dir / "checkpoints"
    found = sorted(root.glob("epoch_*/manifest.json")) if root.is_dir() else []
    return [m.parent for m in found]


MANIFEST_KEYS = ("format", "epoch", "world_size", "config")
MANIFEST_TYPES = {key: (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
                  for key in ("format", "epoch", "world_size")} | {"config": lambda v: isinstance(v, dict)}
"""What each manifest key must hold; a manifest with another value is a damaged checkpoint."""
WANDB_ID = re.compile(r"[^/\\#?%:\s]{1,128}")
"""A W&B run id W&B takes (a resumed run continues the run its checkpoint names)."""


class Resume:
    """The checkpoint a run continues from: its directory, epoch and manifest, and the newer
    checkpoints passed over as damaged (``skipped``: directory and why)."""

    def __init__(self, where: Path, manifest: dict, skipped: list[tuple[Path, str]]) -> None:
        self.where, self.manifest, self.skipped = where, manifest, skipped
        self.epoch = manifest["epoch"]

    @classmethod
    def find(cls, run: RootConfig) -> Resume | None:
        """The newest intact checkpoint that ``train.resume`` points to: under this run dir
        (``true``; none yet means a fresh start) or under the given run dir (which must have
        one). A damaged one (a manifest or rank file that cannot be read: a full disk, a copy cut
        short) is passed over for the one before it; a rank file that names code is refused
        (:mod:`gnntrain.storage.safe_load`)."""
        resume = run.train.resume
        if resume is False:
            return None
        source = Path(run.run_dir) if resume is True else Path(resume).expanduser()
        skipped: list[tuple[Path, str]] = []
        for where in reversed(complete(source)):
            manifest, damage = _inspect(where)
            if damage is None:
                return cls(where, manifest, skipped)
            skipped.append((where, damage))
        if not skipped and resume is True:
            return None
        damaged = f" ({len(skipped)} damaged: {skipped[0][0].name}: {skipped[0][1]})" if skipped else ""
        raise ConfigError(f"train.resume={resume}: no intact checkpoint under {source}/checkpoints{damaged}; valid: "
                          "a run dir trained with train.checkpoint_every > 0")

    def describe_skipped(self) -> list[str]:
        """One line per newer checkpoint passed over, for the user."""
        return [f"checkpoint {where} is damaged ({why}); resuming from {self.where.name} instead"
                for where, why in self.skipped]

    @property
    def run_dir(self) -> Path:
        return self.where.parent.parent

    def check(self, run: RootConfig, world_size: int) -> None:
        """Refuse, in one line, a checkpoint of another world size or another config."""
        if self.manifest.get("format") != FORMAT:
            raise ConfigError(f"train.resume: checkpoint {self.where} has format {self.manifest.get('format')}; "
                              f"valid: {FORMAT}")
        if self.manifest["world_size"] != world_size:
            raise ConfigError(f"train.resume: checkpoint {self.where} was written by {self.manifest['world_size']} "
                              f"workers, this run has {world_size}; valid: cluster.world_size="
                              f"{self.manifest['world_size']}")
        theirs, ours = self.manifest["config"], _trained_config(run)
        for key in sorted(set(theirs) | set(ours)):
            if theirs.get(key) != ours.get(key):
                raise ConfigError(f"train.resume: checkpoint {self.where} was trained with {key}={theirs.get(key)}, "
                                  f"this run has {key}={ours.get(key)}; resume with the same config")

    def records(self) -> list[EpochRecord]:
        """The checkpointed run's records of epochs 1 to the checkpoint's."""
        records = read_records(self.run_dir / "metrics.jsonl")[:self.epoch]
        if [r.epoch for r in records] != list(range(1, self.epoch + 1)):
            raise ConfigError(f"train.resume: {self.run_dir / 'metrics.jsonl'} lacks epochs up to the checkpoint's "
                              f"({self.epoch}); it holds {len(records)}")
        return records

    def load(self, rank: int) -> dict:
        """This rank's strategy state (tensors on the CPU; the strategy places them); the global
        generators are restored."""
        path = self.where / f"rank{rank}.pt"
        try:
            payload = load_plain(path, map_location="cpu")
        except UnsafeFile:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to read is a corrupt checkpoint
            raise ConfigError(f"train.resume: checkpoint file {path} is unreadable "
                              f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
        if payload.get("epoch") != self.epoch or payload.get("rank") != rank:
            raise ConfigError(f"train.resume: checkpoint file {path} holds epoch {payload.get('epoch')} of rank "
                              f"{payload.get('rank')}, not epoch {self.epoch} of rank {rank}")
        set_rng_state(payload["rng"])
        return payload["strategy"]


def _inspect(where: Path) -> tuple[dict, str | None]:
    """A checkpoint's manifest and what damages it (None: intact): the manifest must be JSON with
    :data:`MANIFEST_KEYS`, every rank's file a whole ``torch.save`` file. A manifest of another
    format is left to :meth:`Resume.check`; a rank file that names code is refused here."""
    try:
        manifest = json.loads((where / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        return {}, f"manifest unreadable: {first_line(exc)}"
    lacking = [key for key in MANIFEST_KEYS if not isinstance(manifest, dict) or key not in manifest]
    if lacking:
        return {}, f"manifest lacks {', '.join(lacking)}"
    wrong = [f"{key}={manifest[key]!r}" for key, valid in MANIFEST_TYPES.items() if not valid(manifest[key])]
    wandb_id = manifest.get("wandb_id")
    if wandb_id is not None and not (isinstance(wandb_id, str) and WANDB_ID.fullmatch(wandb_id)):
        wrong.append(f"wandb_id={wandb_id!r} (W&B refuses / \\ # ? % : and spaces in an id)")
    if wrong:
        return {}, f"manifest holds {', '.join(wrong)} (valid: format, epoch and world_size integers >= 1, config a mapping)"
    if manifest["format"] != FORMAT:
        return manifest, None
    for rank in range(int(manifest["world_size"])):
        path = where / f"rank{rank}.pt"
        try:
            code = names_code(path)
        except Exception as exc:  # noqa: BLE001 - any failure to read is a damaged file
            return manifest, f"{path.name} unreadable: {first_line(exc)}"
        if code is not None:
            raise UnsafeFile(path, code)
    return manifest, None
