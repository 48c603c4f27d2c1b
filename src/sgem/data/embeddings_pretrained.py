"""Pretrained image embeddings: timm / torchvision backbones, from local weights only.

`PretrainedEmbedding` wraps a backbone *only* when the library is importable and its
weights are already on disk (an explicit file, torchvision's hub cache or the Hugging Face
cache for timm). Nothing is ever downloaded; when either is missing it raises
`EmbeddingUnavailableError` saying what is missing and how to fix it (`pretrained_available`
asks the same question without raising). `_check_images`, the uint8 (N, H, W, C) input
check, is shared with the embeddings of `sgem.data.embeddings`, where everything here is
also importable from.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

__all__ = ["EmbeddingUnavailableError", "PretrainedEmbedding", "pretrained_available"]


class EmbeddingUnavailableError(RuntimeError):
    """A pretrained backbone was asked for, but its library or its weights are not here."""


def _check_images(images: np.ndarray, who: str) -> np.ndarray:
    images = np.asarray(images)
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(
            f"{who}: images must be uint8 (N, H, W, C) with C in (1, 3), got shape "
            f"{images.shape}. Convert with sgem.data.images.harmonise_images first."
        )
    if images.dtype != np.uint8:
        raise ValueError(
            f"{who}: images must be uint8 in 0..255, got dtype {images.dtype}. Convert with "
            "np.clip(x * 255, 0, 255).astype(np.uint8) if they are floats in [0, 1]."
        )
    return images


# ---------------------------------------------------------------------------------------
# (b) pretrained backbones, only from local weights

_LIBRARIES = ("timm", "torchvision")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _torchvision_cached_weights(model_name: str) -> Path | None:
    import torch
    import torchvision

    weights = torchvision.models.get_model_weights(model_name).DEFAULT
    path = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(weights.url)
    return path if path.is_file() else None


def _timm_cached_weights(model_name: str) -> Path | None:
    import timm

    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    cfg = timm.models.get_pretrained_cfg(model_name)
    hub_id = getattr(cfg, "hf_hub_id", None) if cfg is not None else None
    if not hub_id:
        return None
    for filename in ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin"):
        found = try_to_load_from_cache(hub_id, filename)
        if isinstance(found, str) and os.path.isfile(found):
            return Path(found)
    return None


def pretrained_available(
    library: str, model_name: str, weights: str | os.PathLike | None = None
) -> tuple[bool, str]:
    """Whether `library` is importable and weights for `model_name` are on disk.

    Returns (available, reason); never downloads anything. `weights` is an explicit local
    weights file; without it, torchvision's hub cache (``$TORCH_HOME/hub/checkpoints``) or the
    Hugging Face cache (timm) is looked up.
    """
    if library not in _LIBRARIES:
        return False, f"unknown backbone library {library!r}; use one of {_LIBRARIES}"
    if importlib.util.find_spec(library) is None:
        return False, (
            f"pretrained embedding {library}:{model_name} is not available: {library} is not "
            f"installed. Install it (pip install {library}) and put the weights on disk, or use "
            "embeddings='default' (built-in, no download) or your own array."
        )
    if weights is not None:
        if not Path(weights).is_file():
            return False, (
                f"pretrained embedding {library}:{model_name} is not available: weights file "
                f"{Path(weights)} does not exist"
            )
        return True, f"weights from {Path(weights)}"
    try:
        if library == "torchvision":
            found = _torchvision_cached_weights(model_name)
        else:
            found = _timm_cached_weights(model_name)
    except Exception as exc:
        return False, (
            f"pretrained embedding {library}:{model_name} is not available: cannot resolve "
            f"its weights ({type(exc).__name__}: {exc})"
        )
    if found is None:
        return False, (
            f"pretrained embedding {library}:{model_name} is not available: no weights for it "
            "in the local cache, and sgem never downloads. Pass weights='/path/to/file', or "
            "use embeddings='default'."
        )
    return True, f"weights from {found}"


class PretrainedEmbedding:
    """Pooled features of a pretrained timm / torchvision backbone, from local weights only.

    Raises `EmbeddingUnavailableError` at construction when the library is not installed or
    the weights are not on disk. Images are resized to `input_size` (bilinear), replicated
    to 3 channels if grey and normalised with the ImageNet mean / std.
    """

    def __init__(
        self,
        library: str,
        model_name: str,
        weights: str | os.PathLike | None = None,
        input_size: int = 224,
        batch: int = 128,
        device: str = "cpu",
    ) -> None:
        ok, reason = pretrained_available(library, model_name, weights)
        if not ok:
            raise EmbeddingUnavailableError(reason)
        self.library = library
        self.model_name = model_name
        self.input_size = int(input_size)
        self.batch = int(batch)
        self.device = device
        self.name = f"{library}:{model_name}"
        self.model = self._load(weights)

    def _load(self, weights):  # pragma: no cover - neither library is installed in CI
        import torch

        if self.library == "timm":
            import timm

            path = Path(weights) if weights is not None else _timm_cached_weights(self.model_name)
            model = timm.create_model(
                self.model_name,
                pretrained=True,
                num_classes=0,
                pretrained_cfg_overlay={"file": str(path)},
            )
        else:
            import torchvision

            path = (
                Path(weights)
                if weights is not None
                else _torchvision_cached_weights(self.model_name)
            )
            model = torchvision.models.get_model(self.model_name, weights=None)
            state = torch.load(path, map_location="cpu", weights_only=True)
            model.load_state_dict(state)
            for head in ("fc", "classifier", "head", "heads"):
                if hasattr(model, head):
                    setattr(model, head, torch.nn.Identity())
                    break
        return model.eval().to(self.device)

    def fit(self, images: np.ndarray) -> PretrainedEmbedding:
        return self

    def transform(self, images: np.ndarray) -> np.ndarray:  # pragma: no cover
        import torch
        import torch.nn.functional as F

        images = _check_images(images, "PretrainedEmbedding")
        mean = torch.tensor(IMAGENET_MEAN, device=self.device).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD, device=self.device).view(1, 3, 1, 1)
        out = []
        with torch.no_grad():
            for start in range(0, len(images), self.batch):
                t = torch.from_numpy(images[start : start + self.batch]).to(self.device)
                t = t.permute(0, 3, 1, 2).float() / 255.0
                if t.shape[1] == 1:
                    t = t.expand(-1, 3, -1, -1)
                t = F.interpolate(t, size=self.input_size, mode="bilinear", align_corners=False)
                feats = self.model((t - mean) / std)
                out.append(feats.flatten(1).cpu().numpy().astype(np.float64))
        return np.concatenate(out)
