"""Per-sample losses, their per-cluster bucketing, region losses and the Trainer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import sgem
from sgem.space import Arch, TabularSpace
from sgem.train import TrainConfig, Trainer, bucket_by_cluster, per_sample_nll, region_loss


def test_bucket_by_cluster_matches_a_loop():
    gen = torch.Generator().manual_seed(0)
    n_clusters = 5
    cluster = torch.randint(0, 4, (60,), generator=gen)  # cluster 4 is left empty
    cluster[cluster == 3] = 2
    cluster[7] = 3  # cluster 3 has exactly one sample
    values = torch.randn(60, generator=gen, dtype=torch.float64)
    out = bucket_by_cluster(values, cluster, n_clusters)
    assert out.shape == (n_clusters,)
    for m in range(4):
        members = [float(values[i]) for i in range(60) if int(cluster[i]) == m]
        assert float(out[m]) == pytest.approx(sum(members) / len(members), rel=1e-12)
    assert float(out[3]) == float(values[7])
    assert torch.isnan(out[4])  # no sample: NaN, not 0


def test_bucket_by_cluster_float32_and_gradient():
    values = torch.tensor([1.0, 2.0, 4.0, 8.0], requires_grad=True)
    cluster = torch.tensor([0, 1, 0, 2])
    out = bucket_by_cluster(values, cluster, 3)
    assert out.dtype == torch.float32
    assert out.tolist() == [2.5, 2.0, 8.0]
    out.sum().backward()
    assert values.grad.tolist() == [0.5, 1.0, 0.5, 1.0]


def test_per_sample_nll_cross_entropy_and_unknown_kind():
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]])
    target = torch.tensor([0, 2])
    nll = per_sample_nll(logits, target, "cross_entropy")
    expected0 = -2.0 + np.log(np.exp(2.0) + 1.0 + np.exp(-1.0))
    np.testing.assert_allclose(nll.numpy(), [expected0, np.log(3.0)], rtol=1e-6)
    with pytest.raises(ValueError, match="poisson"):
        per_sample_nll(logits, target, "poisson")
    with pytest.raises(ValueError, match="student_t output must have shape"):
        per_sample_nll(logits, target, "student_t")  # logits are not (batch, horizon, 3)


def test_region_loss_is_the_size_weighted_average_over_the_mask():
    losses = np.array([1.0, 2.0, 10.0, 4.0])
    mask = np.array([True, True, False, True])
    weights = np.array([3.0, 1.0, 100.0, 4.0])
    # (3 * 1 + 1 * 2 + 4 * 4) / (3 + 1 + 4) = 21 / 8
    assert region_loss(losses, mask, weights) == pytest.approx(21.0 / 8.0)
    assert region_loss(losses, np.array([0, 0, 1, 0]), weights) == pytest.approx(10.0)


def test_region_loss_empty_mask_raises():
    with pytest.raises(ValueError, match="non-empty mask"):
        region_loss(np.ones(3), np.zeros(3, dtype=bool), np.ones(3))


# -- the trainer ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy_trainer():
    task = sgem.make_toy_task(0)
    return Trainer(task, TabularSpace(), TrainConfig(steps=20))


ARCH = Arch(("rbf", "linear", "relu"), (0, 0, 2))


def test_train_returns_finite_per_cluster_losses(toy_trainer):
    m = toy_trainer.task.n_clusters
    mask = np.zeros(m, dtype=bool)
    mask[[0, 3, 5, 11]] = True
    outcome = toy_trainer.train(ARCH, mask, seed=3)
    assert outcome.losses.shape == (m,)
    assert outcome.losses.dtype == np.float64
    assert np.isfinite(outcome.losses).all() and (outcome.losses > 0).all()
    assert outcome.seconds >= 0


def test_train_equals_fit_on_the_masked_samples_and_a_manual_cluster_loop(toy_trainer):
    task = toy_trainer.task
    m = task.n_clusters
    mask = np.zeros(m, dtype=bool)
    mask[[1, 2, 7, 8, 15]] = True
    outcome = toy_trainer.train(ARCH, mask, seed=5)

    # the masked training samples, selected in numpy
    keep = np.isin(task.train.cluster, np.flatnonzero(mask))
    x = torch.as_tensor(task.train.x[keep], dtype=torch.float32)
    y = torch.as_tensor(task.train.y[keep])
    model = toy_trainer.fit(ARCH, x, y, seed=5)
    np.testing.assert_array_equal(toy_trainer.cluster_losses(model), outcome.losses)

    # per-cluster mean cross-entropy, one cluster at a time
    manual = np.empty(m)
    with torch.no_grad():
        for c in range(m):
            sel = task.val.cluster == c
            xv = torch.as_tensor(task.val.x[sel], dtype=torch.float32)
            yv = torch.as_tensor(task.val.y[sel])
            manual[c] = float(F.cross_entropy(model(xv), yv))
    np.testing.assert_allclose(outcome.losses, manual, rtol=1e-5, atol=1e-6)


def test_train_is_deterministic_and_seed_dependent(toy_trainer):
    mask = np.ones(toy_trainer.task.n_clusters, dtype=bool)
    a = toy_trainer.train(ARCH, mask, seed=9).losses
    b = toy_trainer.train(ARCH, mask, seed=9).losses
    c = toy_trainer.train(ARCH, mask, seed=10).losses
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_training_lowers_the_loss_on_the_trained_clusters(toy_trainer):
    task = toy_trainer.task
    mask = np.ones(task.n_clusters, dtype=bool)
    trained = toy_trainer.train(ARCH, mask, seed=0).losses
    # the same seed without training: build + data_init only
    torch.manual_seed(0)
    untrained = toy_trainer.build(ARCH)
    untrained.data_init(toy_trainer.x_train, torch.Generator().manual_seed(0))
    untrained.eval()
    before = toy_trainer.cluster_losses(untrained)
    sizes = task.val_cluster_sizes
    assert np.average(trained, weights=sizes) < np.average(before, weights=sizes) - 0.1


def test_training_on_a_region_helps_that_region_most(toy_trainer):
    # the linear cloud's clusters vs the ring cloud's (the task's oracle partition): each
    # region's loss is lower for the model trained on it than for the one trained on the other
    task = toy_trainer.task
    linear = task.oracle_partition == 0
    on_linear = toy_trainer.train(ARCH, linear, seed=0).losses
    on_ring = toy_trainer.train(ARCH, ~linear, seed=0).losses
    sizes = task.val_cluster_sizes

    def avg(losses, region):
        return np.average(losses[region], weights=sizes[region])

    assert avg(on_linear, linear) < avg(on_ring, linear) - 0.5
    assert avg(on_ring, ~linear) < avg(on_linear, ~linear) - 0.5


def test_train_rejects_bad_masks(toy_trainer):
    m = toy_trainer.task.n_clusters
    with pytest.raises(ValueError, match="shape"):
        toy_trainer.train(ARCH, np.ones(m + 1, dtype=bool), seed=0)
    with pytest.raises(ValueError, match="no cluster"):
        toy_trainer.train(ARCH, np.zeros(m, dtype=bool), seed=0)
    with pytest.raises(ValueError, match="empty"):
        toy_trainer.fit(ARCH, toy_trainer.x_train[:0], toy_trainer.y_train[:0], seed=0)


def test_train_config_validation():
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=0.0)
