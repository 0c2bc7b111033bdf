"""The export command (``command.py``): it gathers a run, a Hugging Face export's model card rows
(``huggingface.py``) and the checks that decode (``gguf_gelu.py``), then calls the writers in ``interop/``
(ONNX with the KV cache, single-pass ONNX and TorchScript, GGUF, a Hugging Face folder), which import nothing of a
run.
"""
