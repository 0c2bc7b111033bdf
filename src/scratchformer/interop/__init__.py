"""Weights between scratchformer and other implementations: every conversion lives here, so that model code
stays free of special cases.

- ``torch_nn``: PyTorch's ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` / ``DecoderLayer`` and
  ``nn.Transformer``, both directions; ``to_torch_mask`` flips the mask polarity at that boundary.
- ``hf_folder``: a Llama, Qwen3 or GPT-2 folder read as a ``GPT`` (``llama_plan``; ``huggingface.gpt2_plan``).
- ``huggingface``: GPT-2's and BERT's name plans and configs; BERT folders loaded into ``EncoderClassifier``.
- ``hf_models``, ``hf_llama``, ``hf_tokenizers``: the other way, a scratchformer model and tokenizer as
  ``transformers`` ones (the same plans, read back).
- ``pretrained``: finding pretrained weights (all-MiniLM-L6-v2) locally, or downloading them.
- ``paper``: a library model built with the paper's settings to and from the one-file model, ``scratchformer/paper.py``.
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
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
