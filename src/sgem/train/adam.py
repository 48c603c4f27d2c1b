"""Adam without `torch.optim`: the same arithmetic, none of its start-up cost.

Why not `torch.optim.Adam`: every `torch.optim` optimiser's first `__init__` / `step` imports
`torch._dynamo` (its methods are wrapped in `torch._compile._disable_dynamo`), about one
second of start-up in every process that trains anything, a third of a toy search's fixed
cost. This class calls the kernels `torch.optim.Adam` calls, with the same arguments and
state, so results are bit-identical to it:

* `fused=True` (CPU and CUDA): `torch._fused_adam_`, one kernel for all tensors, as
  `torch.optim.Adam(fused=True)`. The kernel only reads the step counters (float32 tensors
  on the device), which are equal for all parameters, so they share one tensor per device,
  incremented by one op instead of a `_foreach_add_` over all of them (~50 us a step),
  until a step leaves a parameter out (no gradient): from then on each has its own.
* `fused=False`: the per-tensor update of `torch.optim.Adam(foreach=False)` (the default
  for CPU tensors), step counters on the CPU.

Only what sgem uses is supported: one parameter group, L2 weight decay (not decoupled), no
amsgrad, no maximise, no gradient scaler.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


class Adam:
    """`torch.optim.Adam`'s update with its `param_groups[0]["lr"]` contract (schedules set
    the learning rate there), `step()` and `zero_grad()`."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        fused: bool = False,
    ) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam got an empty parameter list")
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(
                f"invalid Adam settings: lr={lr}, betas={betas}, eps={eps}, "
                f"weight_decay={weight_decay}"
            )
        if fused and any(p.device.type not in ("cpu", "cuda") for p in self.params):
            raise ValueError("fused Adam runs on CPU and CUDA tensors only")
        group = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        self.param_groups: list[dict[str, Any]] = [group]
        self.fused = fused
        self._exp_avg: list[torch.Tensor] = []
        self._exp_avg_sq: list[torch.Tensor] = []
        self._steps: list[torch.Tensor] = []
        self._shared = fused  # one step counter per device while every parameter steps

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        if not self._steps:  # lazy state, as torch.optim creates it on the first step
            shared: dict[torch.device, torch.Tensor] = {}
            for p in self.params:
                self._exp_avg.append(torch.zeros_like(p, memory_format=torch.preserve_format))
                self._exp_avg_sq.append(torch.zeros_like(p, memory_format=torch.preserve_format))
                if self.fused:  # the kernel only reads the counter: one per device will do
                    if p.device not in shared:
                        shared[p.device] = torch.zeros((), dtype=torch.float32, device=p.device)
                    self._steps.append(shared[p.device])
                else:
                    self._steps.append(torch.tensor(0.0, dtype=torch.float32))
        group = self.param_groups[0]
        lr = float(group["lr"])
        beta1, beta2 = (float(b) for b in group["betas"])
        eps, wd = float(group["eps"]), float(group["weight_decay"])
        if self._shared and len(live) < len(self.params):
            # a parameter without a gradient keeps its own count from now on (as in torch)
            self._steps = [t.clone() for t in self._steps]
            self._shared = False
        params = [self.params[i] for i in live]
        grads = [p.grad for p in params]
        avgs = [self._exp_avg[i] for i in live]
        sqs = [self._exp_avg_sq[i] for i in live]
        steps = [self._steps[i] for i in live]
        if self.fused:
            if self._shared:
                for counter in {id(t): t for t in steps}.values():  # one per device
                    counter += 1
            else:
                torch._foreach_add_(steps, 1)
            self._fused(params, grads, avgs, sqs, steps, lr, beta1, beta2, wd, eps)
        else:
            for p, g, m, v, t in zip(params, grads, avgs, sqs, steps, strict=True):
                _single_update(p, g, m, v, t, lr, beta1, beta2, wd, eps)

    @staticmethod
    def _fused(params, grads, avgs, sqs, steps, lr, beta1, beta2, wd, eps) -> None:
        # one call per (device, dtype), as torch.optim groups them
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(params):
            groups.setdefault((p.device, p.dtype), []).append(i)
        for idx in groups.values():
            pick = [steps[i] for i in idx]
            torch._fused_adam_(
                [params[i] for i in idx],
                [grads[i] for i in idx],
                [avgs[i] for i in idx],
                [sqs[i] for i in idx],
                [],
                pick,
                amsgrad=False,
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                weight_decay=wd,
                eps=eps,
                maximize=False,
                grad_scale=None,
                found_inf=None,
            )


def _single_update(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step_t: torch.Tensor,
    lr: float,
    beta1: float,
    beta2: float,
    weight_decay: float,
    eps: float,
) -> None:
    """`torch.optim.adam._single_tensor_adam` for one real tensor (same operations, same
    order, so the same bits)."""
    step_t += 1
    if weight_decay != 0:
        grad = grad.add(param, alpha=weight_decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    step = step_t.item()
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    step_size = lr / bias_correction1
    denom = (exp_avg_sq.sqrt() / bias_correction2**0.5).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)


__all__ = ["Adam"]
