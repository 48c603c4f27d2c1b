"""Dense GCN over the cell DAG + an embedding of the cluster mask -> M predicted losses.

Tiny DAGs need no graph library: a batch of (n x n) adjacency matrices and one-hot op
features is all a GCN layer needs (as in NASLib's GCN predictor).

The graph part depends on the architecture only, the head on (graph embedding, mask). Callers
that score one architecture under many masks encode each distinct graph once and gather the
embeddings with `index` (dropout lives in the head only, so this changes nothing but speed).
"""

from __future__ import annotations

import torch
from torch import nn

from ..train.dropout import Dropout


def normalised_adjacency(adj: torch.Tensor) -> torch.Tensor:
    """D^-1/2 (A + A^T + I) D^-1/2, batched: messages flow both ways along each edge."""
    n = adj.shape[-1]
    a = adj + adj.transpose(-1, -2) + torch.eye(n, device=adj.device, dtype=adj.dtype)
    d = a.sum(-1).rsqrt()
    return d.unsqueeze(-1) * a * d.unsqueeze(-2)


class SurrogateNet(nn.Module):
    def __init__(
        self,
        n_node_features: int,
        n_clusters: int,
        hidden: int = 64,
        gcn_layers: int = 3,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.embed = nn.Linear(n_node_features, hidden)
        self.gcn = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(gcn_layers))
        self.mask_embed = nn.Sequential(nn.Linear(n_clusters, hidden), nn.ReLU())
        self.head = nn.Sequential(
            Dropout(dropout),  # sgem's cheaper mask (MC-dropout runs it T times per pool)
            nn.Linear(3 * hidden, 2 * hidden),
            nn.ReLU(),
            Dropout(dropout),
            nn.Linear(2 * hidden, n_clusters),
        )

    def encode_graph(
        self, adj: torch.Tensor, feats: torch.Tensor, normalised: bool = False
    ) -> torch.Tensor:
        """(B, 2*hidden) graph embeddings; `normalised`: `adj` is already
        `normalised_adjacency(adj)` (fits compute it once, not once per epoch)."""
        a = adj if normalised else normalised_adjacency(adj)
        h = torch.relu(self.embed(feats))
        for layer in self.gcn:
            h = h + torch.relu(layer(a @ h))
        # mean over nodes plus the output node, which sees the leaves that form the cell output
        return torch.cat([h.mean(1), h[:, -1]], dim=-1)

    def readout(self, graph: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The head on graph embeddings (B, 2*hidden) and masks (B, M): (B, M)."""
        return self.head(torch.cat([graph, self.mask_embed(mask)], dim=-1))

    def forward(
        self,
        adj: torch.Tensor,
        feats: torch.Tensor,
        mask: torch.Tensor,
        index: torch.Tensor | None = None,
        normalised: bool = False,
    ) -> torch.Tensor:
        """Predictions for masks (B, M). Without `index`, adj/feats hold B graphs; with it,
        they hold the distinct graphs and row i uses graph index[i]."""
        graph = self.encode_graph(adj, feats, normalised)
        if index is not None:
            graph = graph[index]
        return self.readout(graph, mask)
