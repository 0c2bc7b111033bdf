"""Exporting a trained model: ONNX and TorchScript (``formats``), a Hugging Face ``transformers`` folder
(``huggingface``)."""

from scratchformer.app.export.formats import ExportError, export_onnx, export_torchscript, verify_onnx

__all__ = ["ExportError", "export_onnx", "export_torchscript", "verify_onnx"]
