"""The forecasting preprocessing as torch modules (see `graph_parts`): a history with gaps ->
its filled, scaled context window -> the window's descriptors (the router's input).

Input: `history` (n, L) float64, one row per series (any L >= 1); NaN marks a missing value
(a gap inside is interpolated linearly, a gap at either end takes the nearest value, as
`sgem.data.series_gaps.fill_gaps` does), so series of different lengths are given
left-padded with NaN (what `pad_left` does to a short history then follows).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..data.ts_windows import ACF_LAGS


class ScaledContext(nn.Module):
    """`ForecastPreprocessor.windows`: (scaled context (n, C), scale (n,), never-negative
    flag of the whole history (n,)), for rows of any length L >= C."""

    def __init__(self, context: int, floor_fraction: float, min_scale: float) -> None:
        super().__init__()
        self.context = int(context)
        self.floor_fraction, self.min_scale = float(floor_fraction), float(min_scale)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        c = self.context
        # NaN-pad by a context on the left: a row shorter than the context is then padded
        # as `pad_left` pads it, and any L >= 1 is read (NaN is never observed)
        h = torch.cat([torch.full_like(h[:, :1], float("nan")).expand(-1, c), h], dim=1)
        length = h.shape[1]
        obs = torch.isfinite(h)
        hz = torch.where(obs, h, torch.zeros_like(h))
        s = torch.arange(length, device=h.device)  # (L,)
        t = s[-c:]  # the context's positions (C,)
        # observed positions first, ascending: the k-th observed value's position is pos[k]
        pos = torch.sort(torch.where(obs, s, s + length), dim=1).values
        pos = torch.where(pos >= length, pos - length, pos)
        seen = torch.cumsum(obs.long(), dim=1)[:, -c:]  # observed values up to each step
        before = seen - obs[:, -c:].long()  # observed strictly before each step
        # the last observed position at or before each context step, the first at or after
        prev = torch.where(seen > 0, torch.gather(pos, 1, (seen - 1).clamp(min=0)), -1)
        total = seen[:, -1:]
        nxt = torch.gather(pos, 1, before.clamp(max=length - 1))
        nxt = torch.where(before < total, nxt, length)
        has_p, has_n = prev >= 0, nxt < length
        xp = torch.gather(hz, 1, prev.clamp(min=0))
        xn = torch.gather(hz, 1, nxt.clamp(max=length - 1))
        span = (nxt - prev).clamp(min=1).double()
        inside = xp + ((xn - xp) / span) * (t[None, :] - prev).double()
        filled = torch.where(has_p & has_n, inside, torch.where(has_p, xp, xn))
        ctx = torch.where(obs[:, -c:], h[:, -c:], filled)
        count = obs.double().sum(1)
        hist = torch.where(count > 0, hz.abs().sum(1) / count.clamp(min=1), 0.0)
        level = ctx.abs().mean(1)
        scale = torch.maximum(level, self.floor_fraction * hist)
        scale = torch.where(scale > self.min_scale, scale, torch.ones_like(scale))
        scaled = ctx / scale[:, None]
        never_negative = (scaled >= 0).all(1) & ~(h < 0).any(1)
        return scaled, scale, never_negative


def _asinh(x: torch.Tensor) -> torch.Tensor:
    # onnxruntime's Asinh has no float64 kernel; this is its definition
    return torch.sign(x) * torch.log(x.abs() + torch.sqrt(x * x + 1.0))


class Descriptors(nn.Module):
    """`sgem.data.timeseries.clustering_features` (asinh of `window_descriptors`) of scaled
    windows of `length` steps; the periodogram as a DFT by matrix product (same values as
    numpy's rfft to rounding)."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.length = int(length)
        t = np.arange(length)
        tt = np.linspace(0.0, 1.0, length)
        tc = tt - tt.mean()
        self.register_buffer("tc", torch.as_tensor(tc / (tc @ tc), dtype=torch.float64))
        k = np.arange(1, length // 2 + 1)
        angle = 2.0 * np.pi * np.outer(t, k) / length
        self.register_buffer("cos", torch.as_tensor(np.cos(angle), dtype=torch.float64))
        self.register_buffer("sin", torch.as_tensor(np.sin(angle), dtype=torch.float64))
        self.n_freq = len(k)

    def forward(self, c: torch.Tensor) -> torch.Tensor:
        length = self.length
        mean = c.mean(1, keepdim=True)
        dev = c - mean
        energy = (dev * dev).sum(1)
        flat = energy <= 1e-12 * torch.clamp((c * c).sum(1), min=1.0)
        safe = torch.where(flat, torch.ones_like(energy), energy)
        zero = torch.zeros_like(energy)
        acf = [
            torch.where(flat, zero, (dev[:, k:] * dev[:, :-k]).sum(1) / safe)
            if k < length
            else zero
            for k in ACF_LAGS
        ]
        re, im = dev @ self.cos, dev @ self.sin
        power = re * re + im * im
        total = power.sum(1, keepdim=True)
        share = power / torch.where(total > 0, total, torch.ones_like(total))
        positive = share > 0
        plogp = torch.where(positive, share * torch.log(torch.where(positive, share, 1.0)), 0.0)
        entropy = -plogp.sum(1) / float(np.log(self.n_freq)) if self.n_freq > 1 else zero
        entropy = torch.where(flat, zero, entropy)
        dominant = torch.where(flat, zero, share.max(1).values)
        columns = [
            mean[:, 0],
            torch.sqrt(energy / length),
            c.min(1).values,
            c.max(1).values,
            c[:, -1],
            dev @ self.tc,
            *acf,
            (c == 0).double().mean(1),
            (c[:, 1:] - c[:, :-1]).abs().mean(1),
            entropy,
            dominant,
        ]
        return _asinh(torch.stack(columns, dim=1))
