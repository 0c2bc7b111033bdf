"""Decoding: GPT generation (cache, left padding, sliding window, sampling, eos) and seq2seq greedy and
beam search, each checked against an independent slow reference (recompute loops, brute force)."""

import itertools

import pytest
import torch

from conftest import tiny
from scratchformer import GPT, Seq2SeqTransformer
from scratchformer.data.batching import pad_batch
from scratchformer.generation import (
    beam_search,
    beam_search_hypotheses,
    generate,
    gnmt_length_penalty,
    greedy_translate,
    translate,
)
from scratchformer.generation.sampling import draw, filter_logits
from scratchformer.nn.attention import MultiHeadAttention

BOS, EOS = 1, 2
ATTENTIONS = ["softmax", "linear"]  # linear: the model's cache is its recurrent state (nn/linear_attention.py)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models gain nothing from intra-op threads, and on a busy 2-core machine two spinning threads
    can make each call hundreds of times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# Untied output layers: a freshly initialised model with tied embeddings mostly repeats its last input
# token, which would make "same tokens" comparisons nearly vacuous.
def gpt(**kw) -> GPT:
    return GPT(tiny("gpt", **{"tie_embeddings": False, **kw})).eval()


def s2s(**kw) -> Seq2SeqTransformer:
    return Seq2SeqTransformer(tiny("seq2seq", **{"tie_embeddings": False, **kw})).eval()


def sources(lengths, low=3, high=37):
    """Right-padded random sources of the given lengths: ``(src, mask)``."""
    return pad_batch([torch.randint(low, high, (n,)).tolist() for n in lengths], 0)


# ============================================================================================ GPT


def naive_generate(model, prompt: list[int], n: int) -> list[int]:
    """Greedy by recomputing the last ``max_len`` tokens every step: the definition, no cache, no batch."""
    seq = list(prompt)
    for _ in range(n):
        window = torch.tensor([seq[-model.config.max_len:]])
        seq.append(int(model(window)[0, -1].argmax()))
    return seq


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("positional", ["learned", "rotary"])
def test_gpt_cached_equals_uncached_and_the_naive_loop_past_max_len(positional, attention):
    m = gpt(max_len=12, positional=positional, attention=attention)
    prompt = torch.randint(0, 37, (2, 5))
    n = 20  # 5 + 20 > 12: the cache is used up to max_len, then the window slides
    cached = generate(m, prompt, n)
    uncached = generate(m, prompt, n, use_cache=False)
    assert cached.shape == (2, 25)
    assert cached.tolist() == uncached.tolist()
    assert cached.tolist() == [naive_generate(m, p, n) for p in prompt.tolist()]


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_gpt_uses_the_cache_while_it_fits_then_slides(monkeypatch, attention):
    m = gpt(max_len=8, attention=attention)
    calls = []
    hidden_states = m.hidden_states  # generate projects only the last position's hidden state

    def recording(ids, *args, cache=None, **kw):
        calls.append((ids.size(1), cache is not None))
        return hidden_states(ids, *args, cache=cache, **kw)

    monkeypatch.setattr(m, "hidden_states", recording)
    generate(m, torch.randint(0, 37, (2, 3)), 10)
    # the prompt at once, then one token per step until 8 are cached, then windows of the last 8
    assert calls == [(3, True)] + [(1, True)] * 5 + [(8, False)] * 4


def test_gpt_prompt_longer_than_max_len_slides_from_the_start():
    m = gpt(max_len=8)
    prompt = torch.randint(0, 37, (1, 11))
    out = generate(m, prompt, 6)
    assert out.shape == (1, 17)
    assert out[0].tolist() == naive_generate(m, prompt[0].tolist(), 6)


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("use_cache", [True, False])
def test_gpt_left_padded_batch_equals_prompts_one_by_one(use_cache, attention):
    m = gpt(max_len=16, attention=attention)
    prompts = [torch.randint(0, 37, (n,)).tolist() for n in (2, 7, 4)]
    ids, mask = pad_batch(prompts, 0, left=True)
    n = 20  # the longest row outgrows max_len: the window must slide per row, pads excluded
    out = generate(m, ids, n, attention_mask=mask, use_cache=use_cache)
    assert out.shape == (3, 7 + n)
    for row, p in zip(out.tolist(), prompts):
        alone = generate(m, torch.tensor([p]), n, use_cache=use_cache)[0].tolist()
        assert row[7 - len(p):] == alone


def test_gpt_eos_rows_keep_eos_and_generation_stops_when_all_ended():
    m = gpt()
    prompt = torch.randint(0, 37, (3, 4))
    free = generate(m, prompt, 20)[:, 4:].tolist()
    eos = free[0][2]  # row 0 emits this token at its third step: call it eos
    out = generate(m, prompt, 20, eos_id=eos)
    ends = [row.index(eos) if eos in row else None for row in free]
    expected_new = 20 if None in ends else max(ends) + 1  # stop as soon as every row has emitted eos
    assert out.shape == (3, 4 + expected_new)
    for row, free_row, end in zip(out[:, 4:].tolist(), free, ends):
        if end is None:
            assert row == free_row[:expected_new]
        else:  # the same tokens up to eos, then eos only
            assert row == free_row[:end + 1] + [eos] * (expected_new - end - 1)
    # a single row stops right after its first eos
    one = generate(m, prompt[:1], 20, eos_id=eos)
    assert one[0, 4:].tolist() == free[0][:ends[0] + 1]


def test_gpt_sampling_is_reproducible_with_a_seed():
    m = gpt()
    prompt = torch.randint(0, 37, (2, 3))
    a = generate(m, prompt, 15, do_sample=True, seed=7)
    torch.manual_seed(123)  # the global generator must not matter when a seed is given
    b = generate(m, prompt, 15, do_sample=True, seed=7)
    c = generate(m, prompt, 15, do_sample=True, seed=8)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()
    torch.manual_seed(5)
    d = generate(m, prompt, 15, do_sample=True)
    torch.manual_seed(5)
    assert d.tolist() == generate(m, prompt, 15, do_sample=True).tolist()


def _first_step_logits(m, prompt, temperature=1.0):
    return m(prompt)[0, -1] / temperature  # (V,)


def test_gpt_top_k_never_draws_outside_the_top_k():
    m = gpt()
    prompt = torch.randint(0, 37, (1, 5))
    draws = generate(m, prompt.repeat(3000, 1), 1, do_sample=True, top_k=4, seed=0)[:, -1]
    top4 = set(_first_step_logits(m, prompt).topk(4).indices.tolist())
    assert set(draws.tolist()) == top4  # never outside, and all four do get drawn


@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_gpt_top_p_never_draws_outside_the_nucleus(temperature):
    m = gpt()
    prompt = torch.randint(0, 37, (1, 5))
    probs = _first_step_logits(m, prompt, temperature).softmax(-1)
    order = probs.argsort(descending=True)
    # The smallest prefix of the ranking whose mass reaches 0.5.
    size = int((probs[order].cumsum(0) < 0.5).sum()) + 1
    nucleus = set(order[:size].tolist())
    assert 1 < size < 37
    draws = generate(m, prompt.repeat(3000, 1), 1, do_sample=True, top_p=0.5, temperature=temperature,
                     seed=0)[:, -1]
    assert set(draws.tolist()) == nucleus


def test_draw_follows_the_distribution_and_never_draws_a_token_of_probability_zero():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.2, 0.3, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
    generator = torch.Generator().manual_seed(0)
    drawn = torch.stack([draw(probs, generator) for _ in range(20_000)])  # (N, 2)
    assert drawn[:, 1].eq(5).all()
    shares = torch.bincount(drawn[:, 0], minlength=6) / len(drawn)
    assert shares[[0, 2, 5]].eq(0).all()
    assert torch.allclose(shares, probs[0], atol=0.015), shares  # a 20,000-draw share is within 0.004 (1 sd)
    again = torch.stack([draw(probs, torch.Generator().manual_seed(0)) for _ in range(3)])
    assert again.eq(drawn[:1]).all()  # one seed, one draw


def test_filter_logits_combines_top_k_and_top_p_and_always_keeps_the_best():
    logits = torch.tensor([[3.0, 2.9, 2.8, 0.0, -1.0]])
    assert filter_logits(logits, 2, None).isfinite().tolist() == [[True, True, False, False, False]]
    assert filter_logits(logits, None, 0.0).isfinite().tolist() == [[True, False, False, False, False]]
    # top-p is taken over the renormalised top-k: 3 tokens of nearly equal mass, 0.5 needs two of them
    assert filter_logits(logits, 3, 0.5).isfinite().tolist() == [[True, True, False, False, False]]


def test_generation_uses_eval_mode_and_restores_the_mode():
    m = GPT(tiny("gpt", dropout=0.5)).train()
    prompt = torch.randint(0, 37, (2, 3))
    a, b = generate(m, prompt, 10), generate(m, prompt, 10)
    assert a.tolist() == b.tolist()  # dropout off while decoding
    assert m.training
    s = Seq2SeqTransformer(tiny("seq2seq", dropout=0.5)).train()
    src, mask = sources([5, 3])
    assert beam_search(s, src, mask, bos_id=BOS, eos_id=EOS) == beam_search(s, src, mask, bos_id=BOS, eos_id=EOS)
    assert s.training


# ==================================================================================== seq2seq greedy


def naive_greedy(model, src: list[int], n: int) -> list[int]:
    """Greedy translation recomputing the whole target every step, one sentence, no cache."""
    s = torch.tensor([src])
    memory = model.encode(s)
    tgt = [BOS]
    for _ in range(n):
        nxt = int(model.decode(torch.tensor([tgt]), memory)[0, -1].argmax())
        if nxt == EOS:
            break
        tgt.append(nxt)
    return tgt[1:]


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_greedy_translate_equals_the_naive_loop_batched_and_one_by_one(attention):
    m = s2s(attention=attention)
    lengths = [6, 2, 9, 4]
    src, mask = sources(lengths)
    out = greedy_translate(m, src, mask, bos_id=BOS, eos_id=EOS, max_new_tokens=12)
    expected = [naive_greedy(m, src[i, :n].tolist(), 12) for i, n in enumerate(lengths)]
    assert out == expected
    for i, n in enumerate(lengths):
        assert greedy_translate(m, src[i:i + 1, :n], mask[i:i + 1, :n], bos_id=BOS, eos_id=EOS,
                                max_new_tokens=12) == [expected[i]]


def test_greedy_translate_stops_at_eos_and_respects_per_sentence_limits():
    m = s2s(max_len=64)
    src, mask = sources([3, 8])
    free = greedy_translate(m, src, mask, bos_id=BOS, eos_id=99, max_new_tokens=None)  # eos never emitted
    assert [len(h) for h in free] == [3 + 50, 8 + 50]  # the default budget: input length + 50 ...
    capped = greedy_translate(m, src, mask, bos_id=BOS, eos_id=99, max_new_tokens=100)
    assert [len(h) for h in capped] == [64, 64]  # ... and never past max_len
    eos = free[0][1]
    out = greedy_translate(m, src, mask, bos_id=BOS, eos_id=eos)
    for hyp, f in zip(out, free):
        assert hyp == (f[:f.index(eos)] if eos in f else f)


# ====================================================================================== beam search


def test_beam_size_one_is_greedy():
    for m, high in [(s2s(), 37)] + [(peaked_model(seed), V_SMALL) for seed in (2, 3)]:
        src, mask = sources([6, 2, 9, 4, 7, 3, 5, 1], high=high)
        greedy = greedy_translate(m, src, mask, bos_id=BOS, eos_id=EOS, max_new_tokens=15)
        # alpha = 0: a finished hypothesis can never be beaten by the beam that goes on, as in greedy
        assert beam_search(m, src, mask, bos_id=BOS, eos_id=EOS, beam_size=1, length_penalty=0.0,
                           max_new_tokens=15) == greedy
        assert translate(m, src, mask, bos_id=BOS, eos_id=EOS, max_new_tokens=15) == greedy
    assert any(len(g) < 15 for g in greedy)  # some rows did end with eos


@torch.no_grad()
def naive_beam_search(model, src: list[int], K: int, alpha: float, n: int) -> list[int]:
    """Textbook beam search for one sentence: no batch, no cache, no early stop (runs to the limit)."""
    memory = model.encode(torch.tensor([src]))
    beams: list[tuple[list[int], float]] = [([], 0.0)]  # (tokens, log P)
    best: tuple[float, list[int]] | None = None
    for t in range(1, n + 1):
        tgt = torch.tensor([[BOS] + tokens for tokens, _ in beams])
        logp = model.decode(tgt, memory.expand(len(beams), -1, -1))[:, -1].log_softmax(-1).tolist()
        cands = sorted(((s + lp, tokens + [v]) for (tokens, s), row in zip(beams, logp) for v, lp in enumerate(row)),
                       key=lambda c: -c[0])[:2 * K]
        for rank, (s, tokens) in enumerate(cands):
            if rank < K and (tokens[-1] == EOS or t == n):
                score = s / gnmt_length_penalty(t, alpha)
                if best is None or score > best[0]:
                    best = (score, tokens[:-1] if tokens[-1] == EOS else tokens)
        beams = [(tokens, s) for s, tokens in cands if tokens[-1] != EOS][:K]
    assert best is not None
    return best[1]


@pytest.mark.parametrize("alpha", [0.6, 0.0, 1.5])
def test_beam_search_equals_the_textbook_loop(alpha):
    """Batching, the cache and its reordering, early stopping and sentences leaving the batch change
    nothing: the same outputs as a plain loop over candidate lists (also with linear attention, whose
    recurrent states are reordered instead of KV caches)."""
    for m, high, n in [(s2s(), 37, 12), (peaked_model(2), V_SMALL, 8), (peaked_model(5), V_SMALL, 8),
                       (s2s(attention="linear"), 37, 12)]:
        lengths = [6, 2, 9, 4, 7, 3, 5, 1]
        src, mask = sources(lengths, high=high)
        out = beam_search(m, src, mask, bos_id=BOS, eos_id=EOS, beam_size=4, length_penalty=alpha, max_new_tokens=n)
        assert out == [naive_beam_search(m, src[i, :k].tolist(), 4, alpha, n) for i, k in enumerate(lengths)]


def test_beam_search_batched_equals_one_by_one():
    m = s2s(max_len=64)
    lengths = [6, 2, 9, 4, 1]
    src, mask = sources(lengths)
    batched = beam_search_hypotheses(m, src, mask, bos_id=BOS, eos_id=EOS, beam_size=3)
    assert beam_search(m, src, mask, bos_id=BOS, eos_id=EOS, beam_size=3) == [h.tokens for h in batched]
    assert translate(m, src, mask, bos_id=BOS, eos_id=EOS, beam_size=3) == [h.tokens for h in batched]
    for i, n in enumerate(lengths):
        [alone] = beam_search_hypotheses(m, src[i:i + 1, :n], mask[i:i + 1, :n], bos_id=BOS, eos_id=EOS, beam_size=3)
        assert alone.tokens == batched[i].tokens
        assert alone.score == pytest.approx(batched[i].score, abs=1e-4)
        assert len(alone.tokens) <= n + 50


def test_beam_search_without_any_eos_returns_the_best_beam_at_the_limit():
    m = s2s()
    src, mask = sources([5, 3, 7])
    hyps = beam_search_hypotheses(m, src, mask, bos_id=BOS, eos_id=EOS, beam_size=4, max_new_tokens=9,
                                  min_new_tokens=9)
    assert [len(h.tokens) for h in hyps] == [9, 9, 9]
    assert all(EOS not in h.tokens for h in hyps)
    # the reported log-probability is the model's, recomputed by teacher forcing
    with torch.no_grad():
        memory = m.encode(src, mask)
    for i, h in enumerate(hyps):
        with torch.no_grad():
            logp = m.decode(torch.tensor([[BOS] + h.tokens[:-1]]), memory[i:i + 1], mask[i:i + 1]).log_softmax(-1)
        total = logp[0, torch.arange(9), h.tokens].sum()
        assert h.log_prob == pytest.approx(float(total), abs=1e-4)
        assert h.score == pytest.approx(float(total) / gnmt_length_penalty(9, 0.6), abs=1e-4)


def test_beam_search_encodes_once_and_projects_cross_attention_once(monkeypatch):
    m = s2s()
    calls = {"encode": 0, "project_kv": 0}
    encode, project_kv = m.encode, MultiHeadAttention.project_kv

    def counting_encode(*a, **kw):
        calls["encode"] += 1
        return encode(*a, **kw)

    def counting_project_kv(self, memory):
        calls["project_kv"] += 1
        assert memory.size(0) == 3  # once per sentence, not once per beam
        return project_kv(self, memory)

    monkeypatch.setattr(m, "encode", counting_encode)
    monkeypatch.setattr(MultiHeadAttention, "project_kv", counting_project_kv)
    src, mask = sources([5, 3, 7])
    beam_search(m, src, mask, bos_id=BOS, eos_id=EOS, beam_size=4, max_new_tokens=10, min_new_tokens=10)
    assert calls == {"encode": 1, "project_kv": m.config.n_decoder_layers}


# ------------------------------------------------------------------------- exactness against brute force

V_SMALL, N_SMALL = 5, 3  # every output of at most 3 tokens over a 5-token vocabulary: 85 sequences


def peaked_model(seed: int) -> Seq2SeqTransformer:
    """A tiny translator whose output layer is scaled up, so that next-token distributions are far from
    uniform and a locally best token can lead to a globally worse sequence."""
    torch.manual_seed(seed)
    m = s2s(vocab_size=V_SMALL, max_len=16, d_model=16, d_ff=32, n_heads=2)
    with torch.no_grad():
        m.lm_head.weight.mul_(3.0)
    return m


def all_outputs(n: int, vocab: int) -> list[list[int]]:
    """Every possible output: ``y_1 .. y_k eos`` (k < n, no eos before) or ``n`` tokens without eos."""
    words = [t for t in range(vocab) if t != EOS]
    outs = [list(p) + [EOS] for k in range(n) for p in itertools.product(words, repeat=k)]
    return outs + [list(p) for p in itertools.product(words, repeat=n)]


@torch.no_grad()
def brute_force(model, src: list[int], alpha: float) -> tuple[list[int], float]:
    """The best output by ``log P / lp`` over all outputs, each scored by one teacher-forced pass."""
    outs = all_outputs(N_SMALL, V_SMALL)
    s = torch.tensor([src])
    memory = model.encode(s).expand(len(outs), -1, -1)
    tgt = torch.tensor([[BOS] + (y + [0] * N_SMALL)[:N_SMALL - 1] for y in outs])  # padding after: causal
    logp = model.decode(tgt, memory).log_softmax(-1)  # (85, N, V)
    scores = []
    for i, y in enumerate(outs):
        total = float(logp[i, torch.arange(len(y)), y].sum())
        scores.append(total / gnmt_length_penalty(len(y), alpha))
    best = max(range(len(outs)), key=scores.__getitem__)
    y = outs[best]
    return (y[:-1] if y[-1] == EOS else y), scores[best]


@pytest.mark.parametrize("alpha", [0.6, 0.0])
def test_beam_search_finds_the_brute_force_optimum_where_greedy_does_not(alpha):
    misses = 0
    for seed in (2, 3, 5):
        m = peaked_model(seed)
        srcs = [torch.randint(3, V_SMALL, (n,)).tolist() for n in (1, 2, 3, 4, 2, 3, 1, 4, 3, 2, 4, 1)]
        src, mask = pad_batch(srcs, 0)
        best = [brute_force(m, s, alpha) for s in srcs]

        # A beam wide enough to keep every prefix (4 + 16 live ones, 80 candidates at the last step) is
        # exhaustive: it must return the brute-force optimum for every sentence, batched.
        wide = beam_search_hypotheses(m, src, mask, bos_id=BOS, eos_id=EOS, beam_size=128, length_penalty=alpha,
                                      max_new_tokens=N_SMALL)
        for h, (tokens, score) in zip(wide, best):
            assert h.tokens == tokens
            assert h.score == pytest.approx(score, abs=1e-4)

        # Where greedy decoding misses the optimum, the paper's beam of 4 finds it.
        greedy = greedy_translate(m, src, mask, bos_id=BOS, eos_id=EOS, max_new_tokens=N_SMALL)
        beam4 = beam_search(m, src, mask, bos_id=BOS, eos_id=EOS, beam_size=4, length_penalty=alpha,
                            max_new_tokens=N_SMALL)
        for g, b, (tokens, _) in zip(greedy, beam4, best):
            if g != tokens:
                misses += 1
                assert b == tokens
    assert misses > 0, "the test models are too easy: greedy decoding is always optimal"
