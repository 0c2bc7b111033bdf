"""Decoding strategies: functions that take a model (the model maps tokens to logits, nothing else).

- ``generate`` (``sampling.py``): GPT continuation, greedy or sampled (temperature, top-k, top-p), with a KV
  cache, batched prompts of different lengths (left padding) and a sliding window past ``max_len``.
- ``Engine`` (``engine.py``): THE decoding loop of every caller that decodes a GPT (``scratchformer generate``, the
  evaluations' answers, GSM8K, the server): requests (``requests.py``: a prompt, sampling, ``n`` answers, a stop
  rule) admitted by a token budget (``scheduler.py``), their prompts read together into a pool of cache rows
  (``pool.py``), one step for every live answer, stop texts found incrementally (``stops.py``).
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
    **dict.fromkeys(["Engine"], "scratchformer.generation.engine"),
    **dict.fromkeys(["Request", "Sampling", "Stop"], "scratchformer.generation.requests"),
    **dict.fromkeys(["greedy_translate"], "scratchformer.generation.greedy"),
    **dict.fromkeys(["beam_search", "beam_search_hypotheses", "gnmt_length_penalty", "Hypothesis", "translate"],
                    "scratchformer.generation.beam"),
    **dict.fromkeys(["translate_ids"], "scratchformer.generation.batched"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
