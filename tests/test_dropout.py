"""sgem's cheaper dropout: the right drop rate, unbiased, reproducible, per-generator."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sgem.train.dropout import Dropout, dropout, keep_scale


@settings(max_examples=25, deadline=None)
@given(p=st.floats(0.0, 0.9), seed=st.integers(0, 2**31 - 1))
def test_drop_rate_and_scale(p, seed):
    gen = torch.Generator().manual_seed(seed)
    mask = keep_scale((200, 101), p, gen)  # odd size: the last 64-bit draw is partly used
    assert mask.shape == (200, 101)
    kept = mask > 0
    assert torch.allclose(mask[kept], torch.tensor(1.0 / (1.0 - p)))
    n = mask.numel()
    se = (p * (1 - p) / n) ** 0.5
    assert abs((~kept).float().mean().item() - p) <= 5 * se + 1e-4
    # unbiased: E[mask] = 1; a kept entry is 1 / (1 - p), so the mean's standard error is
    # sqrt(p / ((1 - p) n)) (0.02 at p = 0.89: a fixed 0.05 failed about 1 draw in 100)
    assert abs(mask.mean().item() - 1.0) <= 5 * (p / ((1 - p) * n)) ** 0.5 + 1e-4


def test_reproducible_and_independent_streams():
    a = keep_scale((64, 64), 0.3, torch.Generator().manual_seed(1))
    b = keep_scale((64, 64), 0.3, torch.Generator().manual_seed(1))
    c = keep_scale((64, 64), 0.3, torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(5)
    d = Dropout(0.3).train()(torch.ones(64, 64))
    torch.manual_seed(5)
    e = Dropout(0.3).train()(torch.ones(64, 64))
    assert torch.equal(d, e)


def test_eval_mode_and_gradient():
    x = torch.randn(8, 5, requires_grad=True)
    assert dropout(x, 0.5, training=False) is x
    layer = Dropout(0.5)
    assert torch.equal(layer.eval()(x), x)
    y = dropout(x, 0.5, generator=torch.Generator().manual_seed(0))
    y.sum().backward()
    assert torch.equal(x.grad, (y.detach() != 0).float() * 2.0)  # mask * 1/(1-p)


@pytest.mark.parametrize("p", [-0.1, 1.0])
def test_invalid_probability_is_named(p):
    with pytest.raises(ValueError, match="dropout probability"):
        keep_scale((3,), p)
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(p)
