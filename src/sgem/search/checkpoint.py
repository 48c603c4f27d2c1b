"""The search state saved at the end of every iteration, so a resumed run continues exactly.

Everything that decides what happens next is in it: routing logits, incumbents, surrogate
weights, both RNG states, the trace, the visible observations (in order), the failure
count and the batches in flight (`search.handoffs.InFlight.to_state`; none at lag 0, and
none in the checkpoints of the synchronous loop before it was the loop at lag 0, which
therefore resume as they are). It is written as plain data, never as a pickle, so reading
a run directory cannot execute anything: a JSON document (floats written with `repr`, so
they round-trip exactly; PCG64 states are plain big ints; NaN and infinities as JSON's
common extension) plus one safetensors blob with the tensors and arrays, referenced from
the document by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from ..space.arch import Arch
from ..surrogate.model import Surrogate
from .store import ObservationStore

_TAGS = ("__tensor__", "__ndarray__", "__tuple__")


def _encode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """JSON-ready copy of `obj`; tensors and arrays go to `tensors`, referenced by name."""
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, torch.Tensor):
        name = f"t{len(tensors)}"
        tensors[name] = obj.detach().cpu().contiguous().clone()
        return {"__tensor__": name}
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise TypeError("a checkpoint cannot hold object arrays")
        name = f"t{len(tensors)}"
        tensors[name] = torch.from_numpy(np.ascontiguousarray(obj).copy())
        return {"__ndarray__": name}
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj) or any(t in obj for t in _TAGS):
            raise TypeError("checkpoint dict keys must be plain strings")
        return {k: _encode(v, tensors) for k, v in obj.items()}
    raise TypeError(f"a checkpoint cannot hold a {type(obj).__name__}")


def _decode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if len(obj) == 1:
        ((tag, value),) = obj.items()
        if tag == "__tensor__":
            return tensors[value]
        if tag == "__ndarray__":
            return tensors[value].numpy()
        if tag == "__tuple__":
            return tuple(_decode(v, tensors) for v in value)
    return {k: _decode(v, tensors) for k, v in obj.items()}


def encode_checkpoint(state: dict) -> tuple[str, bytes]:
    """(JSON document, safetensors bytes) for a search state: plain data only."""
    tensors: dict[str, torch.Tensor] = {}
    document = json.dumps(_encode(state, tensors), allow_nan=True)
    return document, save_tensors(tensors)


def decode_checkpoint(document: str, blob: bytes) -> dict:
    state = _decode(json.loads(document), load_tensors(blob))
    if not isinstance(state, dict) or type(state.get("iteration")) is not int:
        raise ValueError("a checkpoint is a JSON object with an integer iteration")
    return state


@dataclass
class Restored:
    """What the loop continues from."""

    iteration: int
    logits: np.ndarray
    archs: list[Arch]
    trace: list[dict]
    failures: int
    in_flight: list[dict]  # `InFlight.to_state` of each batch in flight, in order


def save_state(
    store: ObservationStore,
    t: int,
    logits: np.ndarray,
    archs: list[Arch],
    rng: np.random.Generator,
    surrogate: Surrogate,
    trace: list[dict],
    failures: int,
    in_flight: list[dict] | None = None,
) -> None:
    document, tensors = encode_checkpoint(
        {
            "iteration": t,
            "logits": logits,
            "archs": [a.dumps() for a in archs],
            "rng": rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            "surrogate": surrogate.state_dict(),
            "trace": trace,
            "visible": store.visible_keys(),
            "failures": failures,
            "in_flight": list(in_flight or []),
        }
    )
    store.save_checkpoint(t, document, tensors)


def restore_state(
    state: dict, store: ObservationStore, surrogate: Surrogate, rng: np.random.Generator
) -> Restored:
    """Put the store, surrogate and both RNGs back where checkpoint `state` left them."""
    store.mark_interrupted()
    store.restore_visible(state["visible"])
    surrogate.load_state_dict(state["surrogate"])
    rng.bit_generator.state = state["rng"]
    torch.set_rng_state(state["torch_rng"])
    return Restored(
        iteration=int(state["iteration"]),
        logits=np.asarray(state["logits"]),
        archs=[Arch.from_json(a) for a in state["archs"]],
        trace=list(state["trace"]),
        failures=int(state["failures"]),
        in_flight=list(state.get("in_flight", [])),
    )


__all__ = ["Restored", "decode_checkpoint", "encode_checkpoint", "restore_state", "save_state"]
