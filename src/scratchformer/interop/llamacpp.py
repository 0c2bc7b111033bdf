"""Run a GGUF file in llama.cpp (through ``llama-cpp-python``, the ``llama`` extra): a batch of prompts, greedy.

``LlamaCpp(path, batch=B)`` loads the file once; ``start(prompts)`` feeds each prompt as its own sequence (prompts
of different lengths need no padding: each sequence numbers its positions from 0) and returns the last position's
logits ``(B, V)``; ``step(tokens)`` feeds one token per sequence. ``llama_generate`` is greedy decoding on top,
what the tests compare with PyTorch's ``generate``; ``bench/speed`` times the same calls.

The KV cache is kept in float32 (llama.cpp's default is float16) and flash attention is off, so that a float32
file is compared with PyTorch as a float32 computation; llama.cpp's own GELU (a float16 table of the tanh
approximation on CPU) and its matrix kernels remain, which is why the logits agree to about 1e-3, not 1e-6.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from scratchformer.extras import require


def _quiet_logs() -> None:
    """llama-cpp-python prints llama.cpp's load log on stderr unless its logger is set to errors only."""
    import logging

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)


class LlamaCpp:
    """One GGUF model and a context for ``batch`` sequences of up to ``n_ctx`` positions each."""

    def __init__(self, path: str | Path, *, batch: int = 1, n_ctx: int = 512, threads: int | None = None,
                 f32_cache: bool = True) -> None:
        require("llama_cpp", "llama")
        import llama_cpp as lc

        self.lc, self.batch_size = lc, batch
        _quiet_logs()
        lc.llama_backend_init()
        self.model = lc.llama_model_load_from_file(str(path).encode(), lc.llama_model_default_params())
        if not self.model:
            raise ValueError(f"llama.cpp could not load {path}")
        params = lc.llama_context_default_params()
        params.n_ctx, params.n_seq_max, params.kv_unified = batch * n_ctx, batch, True
        params.n_batch = params.n_ubatch = batch * n_ctx
        params.n_threads = params.n_threads_batch = threads or os.cpu_count() or 1
        params.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_DISABLED
        if f32_cache:
            params.type_k = params.type_v = lc.GGML_TYPE_F32
        self.ctx = lc.llama_init_from_model(self.model, params)
        if not self.ctx:
            raise ValueError(f"llama.cpp could not make a context for {path}")
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model))
        self._batch = lc.llama_batch_init(batch * n_ctx, 0, batch)
        self._pos = [0] * batch

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> np.ndarray:
        """Feed ``(token, position, sequence, want_logits)`` items; return the wanted logits in item order."""
        b = self._batch
        b.n_tokens = len(items)
        for i, (tok, pos, seq, out) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, pos, 1, out
            b.seq_id[i][0] = seq
        if self.lc.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed (is the sequence longer than the context?)")
        rows = [np.ctypeslib.as_array(self.lc.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,)).copy()
                for i, item in enumerate(items) if item[3]]
        return np.stack(rows)

    def start(self, prompts: list[list[int]]) -> np.ndarray:
        """A new batch of ``len(prompts) <= batch`` prompts -> the last position's logits ``(B, V)``."""
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)
        items = [(int(t), j, s, j == len(p) - 1) for s, p in enumerate(prompts) for j, t in enumerate(p)]
        self._pos = [len(p) for p in prompts]
        return self._decode(items)

    def step(self, tokens: list[int]) -> np.ndarray:
        """One more token for each sequence -> logits ``(B, V)``."""
        items = [(int(t), self._pos[s], s, True) for s, t in enumerate(tokens)]
        self._pos = [p + 1 for p in self._pos]
        return self._decode(items)

    def score(self, ids: list[int]) -> np.ndarray:
        """Every position's logits ``(T, V)`` for one sequence ``ids`` (a fresh one, as sequence 0)."""
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)
        return self._decode([(int(t), j, 0, True) for j, t in enumerate(ids)])

    def close(self) -> None:
        if self.ctx:
            self.lc.llama_batch_free(self._batch)
            self.lc.llama_free(self.ctx)
            self.lc.llama_model_free(self.model)
            self.ctx = self.model = None

    def __enter__(self) -> LlamaCpp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def llama_generate(path: str | Path, prompts: list[list[int]], max_new_tokens: int, *, threads: int | None = None,
                   step_logits: list | None = None) -> list[list[int]]:
    """Greedy continuation of each prompt by llama.cpp -> prompt + new tokens per row (``step_logits``: a list to
    append each step's ``(B, V)`` logits to)."""
    n_ctx = max(len(p) for p in prompts) + max_new_tokens
    out = [list(map(int, p)) for p in prompts]
    with LlamaCpp(path, batch=len(prompts), n_ctx=n_ctx, threads=threads) as llm:
        logits = llm.start(prompts)
        for i in range(max_new_tokens):
            if step_logits is not None:
                step_logits.append(logits)
            nxt = logits.argmax(-1).tolist()
            for row, t in zip(out, nxt):
                row.append(int(t))
            if i + 1 < max_new_tokens:
                logits = llm.step(nxt)
    return out
