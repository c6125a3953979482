"""Deterministic synthetic graphs with planted communities (the embedded default dataset).

The generator is a degree-corrected stochastic block model:

* node ``i`` gets class ``y_i`` (classes are the communities, balanced) and a degree propensity
  ``theta_i`` drawn from a Pareto law with tail exponent ``degree_exponent``, so degrees are
  power-law-ish (a few hubs, many low-degree nodes);
* ``num_nodes * avg_degree / 2`` undirected edges are drawn: the source with probability
  proportional to ``theta``; with probability ``homophily`` the target is drawn from the source's
  community, otherwise from the whole graph, in both cases proportional to ``theta``. So
  ``homophily`` is the share of edges drawn inside a community; the measured edge homophily is
  ``homophily + (1 - homophily) / num_classes`` in expectation;
* features are ``mu[y_i] + feature_noise * N(0, I)`` with unit-norm random class centroids
  ``mu``: informative, but far from separable node by node, so aggregation over neighbours
  matters and accuracy means something;
* self-loops and duplicate edges are dropped, so the realised average degree is a little below
  ``avg_degree`` on dense settings.

Everything is drawn from one ``torch.Generator`` seeded with ``graph_seed``: the same
parameters always give the same graph, on every rank.
"""

from __future__ import annotations

import torch

from gnntrain.data.graph_data import GraphData, coalesce_edges, random_split


def _draw_proportional(weights_cum: torch.Tensor, low: torch.Tensor, high: torch.Tensor,
                       gen: torch.Generator) -> torch.Tensor:
    """Indices drawn with probability proportional to weights, restricted to cumsum ranges."""
    u = low + torch.rand(low.shape, generator=gen, dtype=torch.float64) * (high - low)
    return torch.searchsorted(weights_cum, u, right=True).clamp_(max=weights_cum.numel() - 1)


def generate(
    num_nodes: int,
    avg_degree: float,
    num_classes: int,
    num_features: int,
    homophily: float,
    degree_exponent: float = 2.5,
    feature_noise: float = 1.0,
    graph_seed: int = 0,
    train_frac: float = 0.6,
    val_frac: float = 0.2,
    split_seed: int = 0,
) -> GraphData:
    gen = torch.Generator().manual_seed(graph_seed)
    n = num_nodes
    y = torch.arange(n) % num_classes
    y = y[torch.randperm(n, generator=gen)]

    u = torch.rand(n, generator=gen, dtype=torch.float64)
    theta = (1.0 - u).pow(-1.0 / (degree_exponent - 1.0)).clamp_(max=max(n / 10.0, 1.0))

    # Nodes ordered by class so each community is one contiguous range of the cumsum.
    order = torch.argsort(y, stable=True)
    cum = torch.cumsum(theta[order], 0)
    class_end = cum[torch.cumsum(torch.bincount(y, minlength=num_classes), 0) - 1]
    class_start = torch.cat([cum.new_zeros(1), class_end[:-1]])

    m = int(n * avg_degree / 2)
    zero = cum.new_zeros(m)
    total = cum[-1].expand(m)
    src = order[_draw_proportional(cum, zero, total, gen)]
    inside = torch.rand(m, generator=gen) < homophily
    c = y[src]
    low = torch.where(inside, class_start[c], zero)
    high = torch.where(inside, class_end[c], total)
    dst = order[_draw_proportional(cum, low, high, gen)]
    del zero, total, inside, c, low, high
    edge_index = coalesce_edges(src, dst, n, symmetric=True)
    del src, dst

    centroids = torch.randn(num_classes, num_features, generator=gen)
    centroids = centroids / centroids.norm(dim=1, keepdim=True)
    x = torch.randn(n, num_features, generator=gen).mul_(feature_noise).add_(centroids[y])

    train, val, test = random_split(torch.ones(n, dtype=torch.bool), train_frac, val_frac, split_seed)
    return GraphData("synthetic", x, y, edge_index, train, val, test, num_classes,
                     coalesced_undirected=True)
