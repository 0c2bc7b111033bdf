"""Decode a model exported by ``scratchformer export --format onnx`` with onnxruntime and numpy only (no PyTorch).

It imports nothing from scratchformer: the export copies it next to ``manifest.json`` and the ``.onnx`` files::

    python onnx_decode.py FOLDER --prompt "ROMEO:" --max-new-tokens 100     # text in and out (a GPT)
    python onnx_decode.py FOLDER --ids 1 17 23 --beam 4                     # any model, token ids in and out

Text goes through the folder's ``tokenizer.json`` and the ``tokenizers`` library (a character vocabulary, carried in
the manifest, needs numpy alone); a GPT stops at any of its end-of-generation ids.

    model = CachedModel("FOLDER")
    generate(model, [[5, 6, 7]], 128)  # GPT: greedy, or do_sample=True, temperature, top_k, top_p, seed
    greedy_translate(model, src, src_mask); beam_search(model, src, src_mask, beam_size=4)  # encoder-decoder

Each function mirrors its twin in ``scratchformer.generation`` step for step (budgets, stopping rules, beam
bookkeeping), so greedy and beam outputs are the same tokens; sampling uses numpy's generator (seeded, other draws).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import onnxruntime as ort

FORMAT = "scratchformer-onnx-cache"


class CachedModel:
    """The graphs of an exported folder and its ``manifest.json``; ``step`` runs the decoder once."""

    def __init__(self, folder: str | Path, *, threads: int | None = None, providers: list[str] | None = None) -> None:
        self.folder = Path(folder)
        self.manifest = m = json.loads((self.folder / "manifest.json").read_text(encoding="utf-8"))
        if m.get("format") != FORMAT:
            raise ValueError(f"{self.folder} is not a cached ONNX export (manifest format {m.get('format')!r})")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or 0  # 0: onnxruntime's default
        self.sessions = {role: ort.InferenceSession(str(self.folder / file), options,
                                                    providers=providers or ["CPUExecutionProvider"])
                         for role, file in m["graphs"].items()}
        self.n_layers, self.max_len = m["n_layers"], m["max_len"]
        self.bos_id, self.eos_id, self.pad_id = m["bos_id"], m["eos_id"], m["pad_id"]

    def empty_past(self, batch: int) -> list[np.ndarray]:
        shape = (batch, self.manifest["n_heads"], 0, self.manifest["head_dim"])
        return [np.zeros(shape, np.float32) for _ in range(2 * self.n_layers)]

    def encode(self, src: np.ndarray, src_mask: np.ndarray) -> list[np.ndarray]:
        """Encoder-decoder: the source ``(B, S)`` -> each layer's cross-attention keys and values, once."""
        return self.sessions["encoder"].run(None, {"src": src.astype(np.int64), "src_mask": src_mask.astype(np.int64)})

    def step(self, ids: np.ndarray, mask: np.ndarray, past: list[np.ndarray] | None,
             cross: list[np.ndarray] | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        """``ids (B, T)`` after ``past`` -> (last position's logits ``(B, V)``, the cache with ``ids`` appended).

        ``mask``: a GPT's real-token mask over past and ``ids`` ``(B, P + T)``; an encoder-decoder's source mask."""
        past = self.empty_past(ids.shape[0]) if past is None else past
        feeds = {"input_ids": ids.astype(np.int64), ("src_mask" if cross else "attention_mask"): mask.astype(np.int64)}
        names = [f"{p}_{k}_{i}" for p in ("past", "cross") for i in range(self.n_layers) for k in ("key", "value")]
        feeds.update(zip(names, past + (cross or [])))
        logits, *present = self.sessions["decoder"].run(None, feeds)
        return logits, present


class Text:
    """Text to ids and back: ``tokenizer.json`` through the ``tokenizers`` library, or the manifest's characters."""

    def __init__(self, folder: str | Path, info: dict) -> None:
        self.info, self.backend, path = info, None, Path(folder) / info.get("file", "tokenizer.json")
        if info.get("kind") == "char":  # numpy alone
            self.stoi = {t: i for i, t in enumerate(info["tokens"]) if i >= info["n_special"]}
            return
        if not info or not path.is_file():
            raise SystemExit("error: this export has no tokenizer.json: pass token ids (--ids)")
        try:
            from tokenizers import Tokenizer
        except ImportError:  # one line, no traceback
            raise SystemExit("error: text needs the tokenizers package (pip install tokenizers); or --ids") from None
        self.backend = Tokenizer.from_file(str(path))
        self.backend.encode_special_tokens = bool(info.get("split_special_tokens"))  # "<eos>" in text: text

    def encode(self, text: str) -> list[int]:  # with the tokenizer's own special tokens (Llama 3's bos)
        if self.backend is None:
            return [self.stoi.get(c, self.info["unk_id"]) for c in text]  # an unknown character: <unk>
        return self.backend.encode(text).ids

    def decode(self, ids: list[int]) -> str:
        if self.backend is None:
            return "".join(self.info["tokens"][i] for i in ids if i >= self.info["n_special"])
        return self.backend.decode(ids, skip_special_tokens=True)


def filter_logits(logits: np.ndarray, top_k: int | None, top_p: float | None) -> np.ndarray:
    """``logits (B, V)`` outside the top-k, then outside the top-p nucleus, set to -inf (ties at the k-th kept)."""
    if top_k is not None and top_k > 0:
        kth = -np.sort(-logits, axis=-1)[:, min(top_k, logits.shape[-1]) - 1:][:, :1]  # (B, 1)
        logits = np.where(logits < kth, -np.inf, logits)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-logits, axis=-1, kind="stable")
        probs = softmax(np.take_along_axis(logits, order, -1))
        drop_sorted = np.cumsum(probs, -1) - probs >= top_p
        drop_sorted[:, 0] = False  # the most likely token always stays
        drop = np.empty_like(drop_sorted)
        np.put_along_axis(drop, order, drop_sorted, -1)
        logits = np.where(drop, -np.inf, logits)
    return logits


def log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def next_token(logits: np.ndarray, do_sample: bool, temperature: float, top_k: int | None, top_p: float | None,
               rng: np.random.Generator) -> np.ndarray:
    if not do_sample:
        return logits.argmax(-1)
    probs = softmax(filter_logits(logits.astype(np.float64) / max(temperature, 1e-8), top_k, top_p))
    cum = np.cumsum(probs, -1)
    u = rng.random(len(probs)) * cum[:, -1]  # the first token whose cumulative probability reaches u
    return (cum < u[:, None]).sum(-1)


def generate(model: CachedModel, input_ids, max_new_tokens: int, *, do_sample: bool = False,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             eos_id=None, seed: int | None = None, attention_mask=None,
             step_logits: list | None = None) -> np.ndarray:
    """Continue ``input_ids (B, T)`` -> ``(B, T + new)``, as ``scratchformer.generation.generate``. ``attention_mask
    (B, T)``: 1 = real token, 0 = left padding. Past ``max_len``, a sliding window of the last ``max_len`` tokens.
    ``eos_id``: one id or several (a row that emitted one keeps emitting the first). ``step_logits``: a list to append
    each step's ``(B, V)`` logits to."""
    ids = np.asarray(input_ids, dtype=np.int64)
    B, T = ids.shape
    if T == 0:
        raise ValueError("generate needs a prompt of at least one token (a bos token, say)")
    rng = np.random.default_rng(seed)
    tokens = np.concatenate([ids, np.zeros((B, max_new_tokens), np.int64)], 1)
    mask = np.ones_like(tokens)
    mask[:, :T] = 1 if attention_mask is None else np.asarray(attention_mask, dtype=np.int64)
    stops = np.atleast_1d(np.asarray([] if eos_id is None else eos_id, np.int64))
    finished = np.zeros(B, bool) if len(stops) else None
    past, cur = None, T
    for _ in range(max_new_tokens):
        if cur <= model.max_len:  # what the cache has not seen yet: the whole prompt at first
            start = 0 if past is None else past[0].shape[2]
            logits, past = model.step(tokens[:, start:cur], mask[:, :cur], past)
        else:  # too long for the model: the last max_len tokens, without a cache
            lo = cur - model.max_len
            logits, _ = model.step(tokens[:, lo:cur], mask[:, lo:cur], None)
        if step_logits is not None:
            step_logits.append(logits)
        nxt = next_token(logits, do_sample, temperature, top_k, top_p, rng)
        if finished is not None:
            nxt = np.where(finished, stops[0], nxt)
            finished |= np.isin(nxt, stops)
        tokens[:, cur] = nxt
        cur += 1
        if finished is not None and finished.all():
            break
    return tokens[:, :cur]


def default_limits(src_mask: np.ndarray, max_new_tokens: int | None, max_len: int) -> np.ndarray:
    """Per-sentence output budgets: input length + 50 (the paper's §6.1) unless given, never past ``max_len``."""
    limits = src_mask.sum(1) + 50 if max_new_tokens is None else np.full(len(src_mask), max_new_tokens)
    return np.minimum(limits, max_len).astype(np.int64)


def greedy_translate(model: CachedModel, src, src_mask, *, max_new_tokens: int | None = None,
                     step_logits: list | None = None) -> list[list[int]]:
    """Greedy decoding of sources ``src (B, S)`` (``src_mask`` 1 = real token) -> token lists without bos/eos."""
    src, src_mask = np.asarray(src, np.int64), np.asarray(src_mask, np.int64)
    B, eos = len(src), model.eos_id
    limits = default_limits(src_mask, max_new_tokens, model.max_len)
    steps = int(limits.max()) if B else 0
    out = np.full((B, steps), eos, np.int64)
    cross, past = model.encode(src, src_mask), None
    token = np.full((B, 1), model.bos_id, np.int64)
    finished = limits <= 0
    for t in range(steps):
        logits, past = model.step(token, src_mask, past, cross)
        if step_logits is not None:
            step_logits.append(logits)
        nxt = logits.argmax(-1)
        out[:, t] = np.where(finished, eos, nxt)
        finished |= (nxt == eos) | (limits <= t + 1)
        if finished.all():
            break
        token = nxt[:, None]
    rows = [row[:n].tolist() for row, n in zip(out, limits)]
    return [row[:row.index(eos)] if eos in row else row for row in rows]


def _top(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest of each row, best first (ties: the lower index first) -> (values, indices)."""
    idx = np.argpartition(-x, k - 1, axis=1)[:, :k] if k < x.shape[1] else np.tile(np.arange(x.shape[1]), (len(x), 1))
    vals = np.take_along_axis(x, idx, 1)
    order = np.lexsort((idx, -vals), axis=1)
    return np.take_along_axis(vals, order, 1), np.take_along_axis(idx, order, 1)


def _penalty(length, alpha: float):
    return (((5 + np.asarray(length, np.float64)) / 6) ** alpha).astype(np.float32)  # GNMT's lp(Y)


def beam_search(model: CachedModel, src, src_mask, *, beam_size: int = 4, length_penalty: float = 0.6,
                max_new_tokens: int | None = None) -> list[list[int]]:
    """Beam search as ``scratchformer.generation.beam_search``: batched over sentences and beams, finished
    sentences leave the batch, scores are ``log P / ((5 + |Y|) / 6) ** alpha``."""
    src, src_mask = np.asarray(src, np.int64), np.asarray(src_mask, np.int64)
    B, K, eos = len(src), beam_size, model.eos_id
    limits = default_limits(src_mask, max_new_tokens, model.max_len)
    results: list = [[] if n <= 0 else None for n in limits.tolist()]
    steps = int(limits.max()) if B else 0
    if steps <= 0:
        return [r or [] for r in results]
    cross = model.encode(src, src_mask)
    logits, past = model.step(np.full((B, 1), model.bos_id, np.int64), src_mask, None, cross)
    expand = np.repeat(np.arange(B), K)  # row n K + k is beam k of sentence n
    past, cross, mask = [p[expand] for p in past], [c[expand] for c in cross], src_mask[expand]
    s = _BeamState(K, length_penalty, limits, steps, eos)
    logits = np.repeat(logits, K, 0)
    for t in range(1, steps + 1):
        rows = s.extend(logits, t)
        done = s.done(t)
        if done.any():
            s.collect(done, results)
            if done.all():
                break
            rows = s.drop(done, rows)
            cross, mask = [c[rows] for c in cross], mask[rows]
        past = [p[rows] for p in past]
        logits, past = model.step(s.seqs[:, -1:], mask, past, cross)
    return [r or [] for r in results]


class _BeamState:
    """N sentences x K beams as rows ``n K + k``: the live beams and the best finished hypothesis of each."""

    def __init__(self, K: int, alpha: float, limits: np.ndarray, steps: int, eos: int) -> None:
        N = len(limits)
        self.K, self.alpha, self.eos, self.limits, self.sentence = K, alpha, eos, limits, np.arange(N)
        self.scores = np.full((N, K), -np.inf, np.float32)  # float32 sums, as PyTorch's
        self.scores[:, 0] = 0.0  # one real beam at the start; its copies must not be picked K times
        self.seqs = np.empty((N * K, 0), np.int64)
        self.best_score, self.best_len = np.full(N, -np.inf, np.float32), np.zeros(N, np.int64)
        self.best_seq = np.full((N, steps), eos, np.int64)

    def extend(self, logits: np.ndarray, t: int) -> np.ndarray:
        N, K, V = len(self.scores), self.K, logits.shape[-1]
        logp = log_softmax(logits.astype(np.float32))
        cand = (self.scores.reshape(N * K, 1) + logp).reshape(N, K * V)
        top_s, top_i = _top(cand, 2 * K)
        beam, tok = top_i // V, top_i % V
        is_eos = tok == self.eos
        ends = (np.arange(2 * K) < K) & (is_eos | (self.limits == t)[:, None]) & np.isfinite(top_s)
        fin = np.where(ends, top_s / _penalty(t, self.alpha), -np.inf)
        f_j = fin.argmax(1)
        f_score = fin[np.arange(N), f_j]
        better = f_score > self.best_score
        f_beam, f_tok = beam[np.arange(N), f_j], tok[np.arange(N), f_j]
        f_seq = np.concatenate([self.seqs[np.arange(N) * K + f_beam], f_tok[:, None]], 1)
        self.best_seq[:, :t] = np.where(better[:, None], f_seq, self.best_seq[:, :t])
        self.best_len = np.where(better, t - (f_tok == self.eos).astype(np.int64), self.best_len)
        self.best_score = np.maximum(self.best_score, f_score)
        self.scores, j = _top(np.where(is_eos, -np.inf, top_s), K)
        rows = (np.arange(N)[:, None] * K + np.take_along_axis(beam, j, 1)).reshape(-1)
        self.seqs = np.concatenate([self.seqs[rows], np.take_along_axis(tok, j, 1).reshape(-1, 1)], 1)
        return rows

    def done(self, t: int) -> np.ndarray:
        live = self.scores[:, 0]
        bound = np.maximum(live / _penalty(t + 1, self.alpha), live / _penalty(self.limits, self.alpha))
        return (self.limits <= t) | (self.best_score >= bound)

    def collect(self, done: np.ndarray, results: list) -> None:
        for n in np.flatnonzero(done):
            results[int(self.sentence[n])] = self.best_seq[n, :int(self.best_len[n])].tolist()

    def drop(self, done: np.ndarray, rows: np.ndarray) -> np.ndarray:
        keep = np.flatnonzero(~done)
        keep_rows = (keep[:, None] * self.K + np.arange(self.K)).reshape(-1)
        self.seqs, self.scores, self.limits, self.sentence = (self.seqs[keep_rows], self.scores[keep],
                                                              self.limits[keep], self.sentence[keep])
        self.best_score, self.best_len, self.best_seq = self.best_score[keep], self.best_len[keep], self.best_seq[keep]
        return rows[keep_rows]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Decode an exported scratchformer model with onnxruntime (no PyTorch).")
    p.add_argument("folder")
    p.add_argument("--prompt", help="text (read with the export's tokenizer)")
    p.add_argument("--ids", type=int, nargs="+", help="prompt (GPT) or source (encoder-decoder) token ids")
    for flag, kind, default in (("--max-new-tokens", int, 100), ("--temperature", float, 0.0), ("--top-k", int, None),
                                ("--top-p", float, None), ("--seed", int, None)):
        p.add_argument(flag, type=kind, default=default)  # temperature 0: greedy
    p.add_argument("--beam", type=int, default=1, help="encoder-decoder: beam size (1 = greedy)")
    a = p.parse_args(argv)
    model = CachedModel(a.folder)
    text = Text(a.folder, model.manifest.get("tokenizer") or {}) if a.prompt is not None else None
    ids = a.ids if text is None else text.encode(a.prompt) or [model.bos_id]  # an empty prompt: the bos token
    if model.manifest["decoder_only"]:  # a decoder alone continues a prompt; an encoder-decoder translates
        stops = model.manifest.get("eos_ids", [model.eos_id])  # where the model's generation ends
        new = generate(model, [ids], a.max_new_tokens, do_sample=a.temperature > 0, temperature=a.temperature,
                       top_k=a.top_k, top_p=a.top_p, seed=a.seed, eos_id=stops)[0, len(ids):].tolist()
        out = ids + new[:next((i for i, t in enumerate(new) if t in stops), len(new))]  # up to the end
    else:
        src, mask = np.array([ids]), np.ones((1, len(ids)), np.int64)
        out = beam_search(model, src, mask, beam_size=a.beam) if a.beam > 1 else greedy_translate(model, src, mask)
        out = out[0]
    print(text.decode(out) if text is not None else " ".join(map(str, out)))


if __name__ == "__main__":
    main()
