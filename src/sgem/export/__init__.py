"""Export of a saved model for serving without sgem: ONNX (`export_onnx`), and the helpers
that feed an exported graph the inputs `SgemModel` takes (`sgem.export.feeds`).

onnx and onnxruntime are an optional extra (pip install 'sgem[export]'); they are imported
only when an export or a graph run is asked for.
"""

from __future__ import annotations

from .onnx_export import MISSING_CATEGORY, ExportInfo, export_onnx, kind_of, read_metadata

__all__ = ["MISSING_CATEGORY", "ExportInfo", "export_onnx", "kind_of", "read_metadata"]
