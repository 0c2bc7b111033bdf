"""Token embeddings and the three positional encodings."""

import math

import torch

from conftest import tiny
from scratchformer.nn import Embeddings, RotaryEmbedding, sinusoidal_table
from scratchformer.nn.embedding import positions_for


def test_sinusoidal_table_is_the_papers_formula():
    table = sinusoidal_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert math.isclose(table[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_regression_positions_are_indexed_by_position_not_batch():
    """A classic tutorial bug: pe[:x.size(0)] on a batch-first tensor adds pe[b] to sentence b."""
    cfg = tiny("seq2seq", scale_embeddings=False)
    emb = Embeddings(torch.nn.Embedding(37, 32), cfg).eval()
    ids = torch.randint(0, 37, (1, 6)).repeat(4, 1)  # four identical sentences
    out = emb(ids, positions_for(6))
    for b in range(4):  # identical sentences get identical encodings, whatever their batch index
        torch.testing.assert_close(out[b], out[0])
    torch.testing.assert_close(out[0] - emb.token(ids[0]), sinusoidal_table(48, 32)[:6])
    # and the same token at two positions is encoded differently
    same = emb(torch.full((1, 2), 5), positions_for(2))
    assert not torch.allclose(same[0, 0], same[0, 1])


def test_embeddings_are_scaled_by_sqrt_d_model():
    cfg = tiny("seq2seq", positional="rotary")  # nothing added: only the scaling remains
    emb = Embeddings(torch.nn.Embedding(37, 32), cfg).eval()
    ids = torch.randint(0, 37, (2, 3))
    torch.testing.assert_close(emb(ids, positions_for(3)), emb.token(ids) * math.sqrt(32))


def test_rotary_scores_depend_only_on_relative_position():
    rope = RotaryEmbedding(8, 64)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(pq, pk):
        return (rope(q, torch.tensor([pq])) * rope(k, torch.tensor([pk]))).sum().item()

    assert math.isclose(score(3, 1), score(12, 10), rel_tol=1e-5)
    assert math.isclose(score(20, 20), (q * k).sum().item(), rel_tol=1e-5)
    assert not math.isclose(score(3, 1), score(3, 2), rel_tol=1e-3)
    # rotation keeps the norm
    x = torch.randn(2, 3, 5, 8)
    torch.testing.assert_close(rope(x, torch.arange(5)).norm(dim=-1), x.norm(dim=-1))


def test_positions_follow_real_tokens_under_left_padding():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert positions_for(5, 0, mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]
    assert positions_for(2, 3, mask).tolist() == [[1, 2], [3, 4]]
    assert positions_for(2, 3).tolist() == [3, 4]
