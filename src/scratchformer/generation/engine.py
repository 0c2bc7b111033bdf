"""One decoding engine for every caller: ``scratchformer generate``, the instruction and DPO evaluations' answers,
GSM8K's answers and the server step the same loop (as nano-vllm's ``LLMEngine.generate`` loops over the online
``step``, and nanochat's ``Engine`` serves its evaluations, chat and RL).

    engine = Engine(model, tokenizer, max_rows=16)
    done = engine.run([Request(ids, 64, Sampling(temperature=0.8, seed=1), Stop(eos_ids, ("\\n\\n",)), n=4), ...])
    done[0].choices[2].text                                    # offline: a list of requests, run to the end
    engine.add(request); engine.step(); ...                    # online (the server's worker): one step at a time

Each ``step()``:

1. lets go of the answers that ended or were cancelled: their cache rows are free at once;
2. admits waiting requests (``scheduler.Scheduler``: in order, while rows are free for all their ``n`` answers and
   their prompts fit a token budget) and reads their prompts together, in one pass: the prompts right-padded into one
   batch (a padded key is masked, and every real token sits at its own position from 0, as alone), each prompt's
   keys and values then copied into a row of the pool (``pool.KVPool``); the other answers to the same prompt are
   copies of that row: a prompt is read once however many answers it asks for. Each answer picks its first token
   from the prompt's last logits;
3. decodes one token for every live answer in one forward pass over all rows (each at its own position, over its
   own cached keys), its logits from the model's own ``output_logits``, and each answer picks its token (among those
   its grammar allows, if it has one: ``grammar.py``): the argmax (``temperature == 0``), or a draw with its own
   settings and generator (the draw ``generate`` makes for a batch of one: an answer gets the tokens ``generate``
   gives it alone, whoever else is in the batch);
4. checks each new token against the answer's stop rule: an end-of-text id (not kept), a stop text
   (``stops.TextStop``: found without decoding the whole answer again), the grammar's end, the token budget.

A model whose cache is not keys and values (``attention="linear"``: a recurrent state) keeps a cache per answer, and
is prefilled and decoded row by row in the same loop. The tensor-level ``sampling.generate()`` (the walkthrough's,
with its sliding window past ``max_len``) stays as it is, beside this engine; beam search and translation too.

Only ``add`` and ``cancel`` may be called from other threads; one thread steps.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from scratchformer.data.batching import pad_batch
from scratchformer.generation.answers import fail, new_choice, pick, take
from scratchformer.generation.grammar import Vocabulary
from scratchformer.generation.pool import KVPool
from scratchformer.generation.prefixes import Prefixes
from scratchformer.generation.requests import Choice, Request
from scratchformer.generation.scheduler import Scheduler
from scratchformer.models import GPT, eval_mode
from scratchformer.nn.kv_cache import DecoderCache

__all__ = ["Engine"]


class Engine:
    """Decodes ``Request``s (see the module docstring). ``tokenizer``: for stop texts and the answers' text (None:
    tokens only). ``max_rows``: the most answers decoded at once. ``prefill_tokens``: the prompt tokens one step reads
    at most (a first prompt longer than that is read alone). ``context``: the positions (prompt and answer) a row
    holds, its memory reserved now and never grown (a server's: None grows rows as needed, up to the model's window).
    ``kept``: rows that keep recent answers for prefix reuse (``prefixes.py``; none for a model with sliding-window
    layers, whose rows keep only their window: ``pool.py``). ``vocabulary``: the tokenizer as a grammar reads it
    (``grammar.Vocabulary``, or what makes it at the first request with a grammar)."""

    def __init__(self, model: GPT, tokenizer: object | None = None, *, max_rows: int = 16,
                 prefill_tokens: int = 8192, context: int | None = None, kept: int = 0,
                 vocabulary: Vocabulary | Callable[[], Vocabulary] | None = None) -> None:
        self.model, self.tokenizer, self.max_rows = model, tokenizer, max_rows
        self.max_len = min(model.config.max_len, context or model.config.max_len)
        self.device = model.output_weight().device
        self.scheduler = Scheduler(prefill_tokens)
        self.live: list[tuple[Request, Choice]] = []  # live[i] holds pool row i
        self.caches: dict[int, DecoderCache] = {}  # a recurrent model's cache of each live answer, by id(choice)
        self.generated = 0  # tokens decoded since the start (those of cancelled answers too)
        self.peak = 0  # the most answers decoded in one step
        probe = model.new_cache(1, 1)
        holds = KVPool.holds(probe)
        kept = kept if holds and KVPool.reuses_prefixes(probe) else 0  # no rows reserved for reuse that cannot be
        self.pool = KVPool(probe, max_rows, self.max_len, width=context and self.max_len, kept=kept) if holds else None
        self.prefixes = Prefixes(kept) if kept else None
        self._vocabulary = vocabulary  # a grammar's view of the tokenizer (made at the first grammar when None)

    # ----------------------------------------------------------------------------------- from any thread

    def add(self, request: Request) -> Request:
        """Queue ``request``; it is admitted at a coming step. ``ValueError`` if it cannot be answered here."""
        if not request.prompt:
            raise ValueError("a request needs a prompt of at least one token")
        if request.max_new_tokens < 1 or len(request.prompt) + request.max_new_tokens > self.max_len:
            raise ValueError(f"{len(request.prompt)} prompt tokens and {request.max_new_tokens} new ones do not fit "
                             f"the model's {self.max_len} positions")
        if not 1 <= request.n <= self.max_rows:
            raise ValueError(f"n={request.n}: this engine decodes 1 to {self.max_rows} answers at once")
        vocabulary = self.vocabulary() if request.grammar is not None else None
        request.choices = [new_choice(request, i, self.device, self.tokenizer, vocabulary) for i in range(request.n)]
        self.scheduler.put(request)
        return request

    def vocabulary(self) -> Vocabulary:
        """The tokenizer's tokens as a grammar reads them (``grammar.Vocabulary``), made at the first use."""
        if not isinstance(self._vocabulary, Vocabulary):
            tok = self.tokenizer  # (an answer under a grammar needs the engine's tokenizer)
            made = self._vocabulary or (lambda: Vocabulary(tok, self.model.config.vocab_size, tuple(tok.eos_ids)))
            self._vocabulary = made()
        return self._vocabulary

    @staticmethod
    def cancel(request: Request) -> None:
        """End ``request`` at the next step (its rows are freed then); safe from any thread."""
        request.cancelled = True

    @property
    def busy(self) -> bool:
        return bool(self.live or len(self.scheduler))

    def counts(self) -> dict[str, int]:
        return {"running": len(self.live), "waiting": len(self.scheduler), "tokens_generated": self.generated,
                "peak_running": self.peak}

    # ----------------------------------------------------------------------------------- offline

    def run(self, requests: list[Request], progress=None) -> list[Request]:
        """Every request answered to its end, in the order given; ``progress(k)``: told each time k of them end."""
        for request in requests:
            self.add(request)
        left = set(map(id, requests))
        while self.busy:
            ended = [r for r in self.step() if r.done and id(r) in left]
            left -= set(map(id, ended))
            if progress is not None and ended:
                progress(len(ended))
        return requests

    # ----------------------------------------------------------------------------------- the step

    @torch.no_grad()
    def step(self) -> list[Request]:
        """Release, admit and prefill, decode one token for every live answer; the requests touched (each told by
        its ``on_update``)."""
        touched: dict[int, Request] = {}
        with eval_mode(self.model):
            self._release()
            free = self.pool.free if self.pool is not None else self.max_rows - len(self.live)
            admitted = self.scheduler.admit(free)
            for request in admitted:
                touched[id(request)] = request
            ready = [r for r in admitted if not self._end_if_cancelled(r)]
            if ready:
                self._prefill(ready)
            self._release()
            if self.live:
                self.peak = max(self.peak, len(self.live))
                for (request, choice), token in zip(list(self.live), self._decode()):
                    self.generated += 1
                    take(request, choice, token)
                    touched[id(request)] = request
                self._release()
        for request in touched.values():
            if request.on_update is not None:
                request.on_update(request)
        return list(touched.values())

    def fail_all(self, reason: str = "error") -> list[Request]:
        """End every live and waiting request with ``finish_reason=reason`` (after a failed step); returns them."""
        failed = {id(r): r for r, _ in self.live} | {id(r): r for r in self.scheduler.take_all()}
        for request in failed.values():
            for choice in request.choices:
                choice.finish_reason = choice.finish_reason or reason
        self.live, self.caches = [], {}
        if self.pool is not None:
            self.pool.lengths.clear()
        if self.prefixes is not None:  # what a failed step left in the kept rows is not trusted either
            self.prefixes.clear()
        return list(failed.values())

    # ----------------------------------------------------------------------------------- its parts

    def _end_if_cancelled(self, request: Request) -> bool:
        if request.cancelled:
            for choice in request.choices:
                choice.finish_reason = choice.finish_reason or "cancelled"
        return request.cancelled

    def _prefill(self, requests: list[Request]) -> None:
        """Read the admitted prompts: each request's first answer takes a row, the others copies of it; each answer
        picks its first token. A prompt that begins with a kept answer reads only the rest (``prefixes.py``); the
        others are read together, in one pass. A request whose admission fails ends with an error, its rows freed;
        the others, and the rows of the answers already live, are as they were."""
        if self.pool is None:  # a recurrent state: one prompt at a time, a cache per answer
            for request in requests:
                self._guarded(request, self._prefill_state)
            return
        found = {id(r): self.prefixes.find(r.prompt) if self.prefixes is not None else None for r in requests}
        for request in [r for r in requests if found[id(r)] is not None]:
            self._guarded(request, lambda r: self._prefill_from(r, *found[id(r)]))
        rest = [r for r in requests if found[id(r)] is None]
        if not rest:
            return
        try:
            ids, mask = (t.to(self.device) for t in pad_batch([r.prompt for r in rest], 0))  # (k, T), right-padded
            mask = None if bool(mask.all()) else mask  # prompts of one length: the model's unmasked path, as alone
            cache = self.model.new_cache(len(rest), ids.size(1), windows=False)  # rows copied out at their lengths
            hidden = self.model.hidden_states(ids, mask, cache=cache)  # (k, T, C)
            lengths = torch.tensor([len(r.prompt) for r in rest], device=self.device)
            last = hidden[torch.arange(len(rest), device=self.device), lengths - 1]  # (k, C)
            logits = self.model.output_logits(last)  # (k, V)
        except Exception as err:  # noqa: BLE001 - the prompts of this pass fail; the live answers go on
            for request in rest:
                fail(request, err)
            return
        for i, request in enumerate(rest):
            self._guarded(request, lambda r, i=i: self._place(r, cache, i, logits[i:i + 1]))

    def _guarded(self, request: Request, admit) -> None:
        """``admit(request)``; if it fails, the request ends with an error and every row it took is freed."""
        live_before = len(self.live)
        try:
            admit(request)
        except Exception as err:  # noqa: BLE001 - this request fails; the others and the pool stay whole
            while len(self.live) > live_before:  # its rows are the last ones taken
                _, choice = self.live.pop()
                if self.pool is not None:
                    self.pool.remove(len(self.live))
                self.caches.pop(id(choice), None)
                choice.row = -1
            fail(request, err)

    def _place(self, request: Request, cache: DecoderCache, index: int, logits: Tensor) -> None:
        """Row ``index`` of a prefill's ``cache`` into the pool for the request's first answer, copies for the
        others; each answer's first token from ``logits (1, V)``."""
        assert self.pool is not None
        request.choices[0].row = self.pool.add(cache, index, len(request.prompt))
        self.live.append((request, request.choices[0]))
        self._fork(request, logits)

    def _fork(self, request: Request, logits: Tensor) -> None:
        """The other answers copy the first one's row; each answer picks its first token from ``logits (1, V)``."""
        assert self.pool is not None
        for choice in request.choices[1:]:
            choice.row = self.pool.fork(request.choices[0].row)
            self.live.append((request, choice))
        picked = pick(logits.expand(request.n, -1), [(request, c) for c in request.choices])
        for choice, token in zip(request.choices, picked):
            self.generated += 1
            take(request, choice, token)

    def _prefill_from(self, request: Request, slot: int, length: int) -> None:
        """A prompt whose first ``length`` tokens a kept row holds: those copied into a new row, the rest read into it
        (from position ``length``), then its other answers forked as any prompt's."""
        assert self.pool is not None
        row, cache = self.pool.resume(slot, length, len(request.prompt))
        request.choices[0].row = row
        self.live.append((request, request.choices[0]))  # live at once: if reading fails, _guarded frees the row
        ids = torch.tensor([request.prompt[length:]], device=self.device)
        hidden = self.model.hidden_states(ids, cache=cache)[:, -1]  # positions length .. len(prompt) - 1
        self.pool.lengths[row] = len(request.prompt)
        request.cached_tokens = length
        self._fork(request, self.model.output_logits(hidden))

    def _prefill_state(self, request: Request) -> None:
        ids = torch.tensor([request.prompt], device=self.device)
        for choice in request.choices:  # (each answer reads the prompt into its own state)
            cache = self.model.new_cache(1, len(request.prompt) + request.max_new_tokens)
            hidden = self.model.hidden_states(ids, cache=cache)[:, -1]
            self.caches[id(choice)] = cache
            self.live.append((request, choice))
            choice.row = len(self.live) - 1
            self.generated += 1
            take(request, choice, pick(self.model.output_logits(hidden), [(request, choice)])[0])

    def _decode(self) -> list[int]:
        """One new token for every live answer: one pass over all rows, or (a recurrent model) row by row."""
        last = torch.tensor([[c.tokens[-1]] for _, c in self.live], device=self.device)  # (n, 1)
        if self.pool is None:
            hidden = torch.cat([self.model.hidden_states(last[i:i + 1], cache=self.caches[id(c)])[:, -1]
                                for i, (_, c) in enumerate(self.live)])
        else:
            positions, mask = self.pool.step_inputs()  # (n, 1), (n, W') or None
            hidden = self.model.hidden_states(last, mask, position_ids=positions,
                                              cache=self.pool.decoder_cache())[:, -1]  # (n, C)
            self.pool.advance()
        return pick(self.model.output_logits(hidden), self.live)

    def _release(self) -> None:
        """Free the rows of answers that ended and of cancelled requests (the last live row moves into each freed
        one)."""
        for request, choice in [(r, c) for r, c in self.live if r.cancelled or c.done]:
            if not choice.done:
                choice.finish_reason = "cancelled"
            i = next(k for k, (_, c) in enumerate(self.live) if c is choice)
            if self.prefixes is not None and choice.index == 0 and choice.finish_reason in ("stop", "length"):
                length = self.pool.lengths[i]  # the prompt and the answer, as far as the row's cache reached
                self.pool.keep(i, self.prefixes.keep((request.prompt + choice.tokens)[:length]), length)
            if self.pool is not None:
                self.pool.remove(i)
            moved = self.live.pop()
            if moved[1] is not choice:
                self.live[i] = moved
                moved[1].row = i
            self.caches.pop(id(choice), None)
            choice.row = -1
