"""Traffic kinds and their categories.

Every kind belongs to one *category*, declared once, so that a time or byte count means the
same thing whichever strategy produced it: the kinds of the shared mechanisms (halo exchange,
pipeline stages, feature fetching, model migration, gradient all-reduce) in
:data:`KIND_CATEGORIES`, a method's own kinds in its registration
(:class:`gnntrain.strategies.registry.Method`), which :func:`declare` adds:

* ``data`` — what a method moves to compute: halo rows and their gradients, activations and
  their gradients between pipeline stages, remote features and labels of sampled nodes,
  migrating models (parameters and accumulated gradients), projections of input features
  and their gradients (P3's partial activations, Naive's intermediate data), the topology of
  subgraphs that travel to where the features are (P3's and Naive's ``topology``);
* ``sync`` — keeping replicas consistent: gradient all-reduces, cross-rank statistics (batch
  norm), assembling weights split over ranks;
* ``control`` — agreeing on what to send: sampling masks, bit-width plans and their traces,
  the ids of fetched rows, the epoch times that micrograph merging decides on;
* ``eval`` — any kind recorded during evaluation (recorded as ``eval_<kind>``);
* traffic that fills historical embeddings before the first epoch trains (GNNPipe's warm-up
  pass, recorded as ``history_<kind>``) and the one exchange of the input's halo rows that
  ``model.precompute_first`` makes before training (``precompute_<kind>``) is ``data``: the
  method moves it to compute;
* ``diag`` — extra traffic for diagnostics (recorded as ``diag_<kind>``), never part of
  training's ``comm_bytes``.
"""

from __future__ import annotations

KIND_CATEGORIES: dict[str, str] = {
    "halo_fwd": "data",
    "halo_bwd": "data",
    "pipe_fwd": "data",
    "pipe_bwd": "data",
    "feat_fetch": "data",
    "label_fetch": "data",
    "model_migrate": "data",
    "allreduce": "sync",
    "bn_stats": "sync",
    "bn_stats_grad": "sync",
    "fetch_ids": "control",
}
PREFIX_CATEGORIES = {"eval_": "eval", "diag_": "diag", "history_": "data", "precompute_": "data"}
CATEGORIES = ("data", "sync", "control", "eval", "diag")
TRAINING_CATEGORIES = ("data", "sync", "control")
TIMED_CATEGORIES = (*TRAINING_CATEGORIES, "diag")
"""The categories whose time is split into wait, transfer and hidden (evaluation's is not timed:
it runs outside the epoch)."""


def declare(kinds: dict[str, str]) -> None:
    """Add kinds and their categories (a method's own, at its registration); a kind keeps the
    category it was first declared with."""
    for kind, name in kinds.items():
        if name not in TRAINING_CATEGORIES:
            raise ValueError(f"kind {kind!r} declared with category {name!r}; valid: {', '.join(TRAINING_CATEGORIES)}")
        if KIND_CATEGORIES.setdefault(kind, name) != name:
            raise ValueError(f"kind {kind!r} is already declared as {KIND_CATEGORIES[kind]!r}, not {name!r}")


def category(kind: str) -> str:
    """The category of a recorded kind (prefix included); unknown kinds are an error, so every
    new kind is declared (:func:`declare`)."""
    for prefix, name in PREFIX_CATEGORIES.items():
        if kind.startswith(prefix):
            return name
    if kind not in KIND_CATEGORIES:
        raise KeyError(f"communication kind {kind!r} has no category; declare it with the method that sends it "
                       "(Method.kinds) or in gnntrain.timing.kinds")
    return KIND_CATEGORIES[kind]


def by_category(per_kind: dict[str, float], categories: tuple[str, ...] = CATEGORIES) -> dict[str, float]:
    """Sum per-kind figures into ``categories`` (every one present, 0 where nothing was recorded)."""
    sums = dict.fromkeys(categories, 0.0)
    for kind, value in per_kind.items():
        name = category(kind)
        if name in sums:
            sums[name] += value
    return sums
