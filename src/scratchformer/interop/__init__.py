"""Outside formats, each one's reader and writer side by side: every conversion lives here, so that model code
stays free of special cases. A reader gives a model, its config and its tokenizer; a writer takes them (and what the
caller knows of the run as data: a model card's rows) and imports nothing of a run, of decoding or of training
(the export command, ``app/export/``, gathers a run and calls them).

- ``torch_nn``: PyTorch's ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` / ``DecoderLayer`` and
  ``nn.Transformer``, both directions; ``to_torch_mask`` flips the mask polarity at that boundary.
- Hugging Face: ``hf_folder`` reads a Llama, Qwen3, Mistral, Gemma 3 or GPT-2 folder as a ``GPT`` (``llama_plan``,
  ``hf_gemma``, ``hf_moe``; ``huggingface.gpt2_plan``), ``huggingface`` GPT-2's and BERT's name plans and BERT
  folders, ``folder_tokenizer`` a folder's tokenizer; ``hf_models``, ``hf_llama``, ``hf_tokenizers`` the other
  way (the same plans, read back), ``hf_export`` writes and checks the folder.
- GGUF for llama.cpp: ``gguf`` (with ``gguf_vocab``, ``gguf_gemma``, ``gguf_moe``) writes it, ``llamacpp`` runs it.
- ONNX: ``onnx_cache`` writes the graphs with the KV cache and ``onnx_decode``, the loop that decodes them with
  onnxruntime and numpy alone (one file, copied beside them); ``traced``: one-pass ONNX and TorchScript.
- ``paper``: a library model built with the paper's settings to and from the one-file model, ``scratchformer/paper.py``.
- ``pretrained``: finding pretrained weights (all-MiniLM-L6-v2) locally, or downloading them.

Names load on first use, so that ``onnx_decode`` (numpy and onnxruntime only) imports without PyTorch.
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["to_torch_mask", "mha_to_torch", "mha_from_torch", "encoder_layer_to_torch",
                     "encoder_layer_from_torch", "decoder_layer_from_torch", "to_torch_transformer",
                     "load_torch_transformer"], "scratchformer.interop.torch_nn"),
    "gpt2_from_pretrained": "scratchformer.interop.hf_folder",
    "bert_from_pretrained": "scratchformer.interop.huggingface",
    **dict.fromkeys(["find_pretrained", "minilm_path"], "scratchformer.interop.pretrained"),
    **dict.fromkeys(["to_paper", "from_paper"], "scratchformer.interop.paper"),
    **dict.fromkeys(["ExportError", "export_onnx", "export_torchscript", "verify_onnx"],
                    "scratchformer.interop.traced"),
    "export_onnx_cached": "scratchformer.interop.onnx_cache",
    **dict.fromkeys(["export_gguf", "GGUF_TYPES"], "scratchformer.interop.gguf"),
    "write_hf": "scratchformer.interop.hf_export",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
