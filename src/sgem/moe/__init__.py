"""The final Mixture-of-Experts built from a search result."""

from .cluster_gated import ClusterGatedMoE, MoEReport, train_final_moe

__all__ = ["ClusterGatedMoE", "MoEReport", "train_final_moe"]
