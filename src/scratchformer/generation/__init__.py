"""Decoding strategies: functions that take a model (the model maps tokens to logits, nothing else).

- ``generate`` (``sampling.py``): GPT continuation, greedy or sampled (temperature, top-k, top-p), with a KV
  cache, batched prompts of different lengths (left padding) and a sliding window past ``max_len``.
- ``generate_until`` (``until.py``): greedy continuations of many prompts, each until an end-of-text token, a stop
  sequence or its budget; a row that has stopped leaves its batch (what GSM8K's scoring asks of a model).
- ``greedy_translate`` (``greedy.py``): seq2seq greedy decoding, batched; the encoder runs once, the
  cross-attention keys/values are projected once, and the decoder keeps a KV cache.
- ``beam_search`` (``beam.py``): seq2seq beam search with the setup of the paper (§6.1): beam size 4, length
  penalty alpha = 0.6, at most (input length + 50) output tokens. Batched over sentences *and* beams.
- ``translate``: greedy for ``beam_size=1``, beam search otherwise.
- ``translate_ids`` (``batched.py``): many sentences, sorted by length into token-budget batches.

Masks are boolean with ``True`` = real token (may be attended to), as everywhere in scratchformer.
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["generate", "filter_logits", "next_token"], "scratchformer.generation.sampling"),
    **dict.fromkeys(["generate_until"], "scratchformer.generation.until"),
    **dict.fromkeys(["greedy_translate"], "scratchformer.generation.greedy"),
    **dict.fromkeys(["beam_search", "beam_search_hypotheses", "gnmt_length_penalty", "Hypothesis", "translate"],
                    "scratchformer.generation.beam"),
    **dict.fromkeys(["translate_ids"], "scratchformer.generation.batched"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
