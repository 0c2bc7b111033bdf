"""Exporting a trained model: ONNX with the KV cache (``onnx_cache``, decoded without PyTorch by ``onnx_decode``),
single-pass ONNX and TorchScript (``formats``), GGUF for llama.cpp (``gguf``), a Hugging Face ``transformers``
folder (``huggingface``).

Names load on first use, so that ``onnx_decode`` (numpy and onnxruntime only) imports without PyTorch.
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["ExportError", "export_onnx", "export_torchscript", "verify_onnx"],
                    "scratchformer.app.export.formats"),
    "export_onnx_cached": "scratchformer.app.export.onnx_cache",
    **dict.fromkeys(["export_gguf", "GGUF_TYPES"], "scratchformer.app.export.gguf"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
