"""LoRA (``nn/lora.py``) against ``peft``, the reference implementation: random ``transformers`` models (GPT-2, BERT,
Llama) loaded into scratchformer, the same adapter weights put on both, then the logits, the adapters' gradients and
the merged model compared."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from scratchformer.checkpoints import load_model
from scratchformer.interop.huggingface import bert_from_pretrained
from scratchformer.nn.lora import LoRALinear, add_lora, merge_lora

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) makes the models")
peft = pytest.importorskip("peft", reason="the dev extra (peft) is the reference here")

R, ALPHA, V = 4, 8.0, 120
SMALL = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4)
# peft's module (after the layer prefix) -> scratchformer's module (after its layer prefix) and LoRA target(s)
BERT = {"attention.self.query": ("self_attn.in_proj", ("query",)),
        "attention.self.key": ("self_attn.in_proj", ("key",)),
        "attention.self.value": ("self_attn.in_proj", ("value",)),
        "attention.output.dense": ("self_attn.out_proj", ("output",)), "intermediate.dense": ("ffn.linear1", ("ff",)),
        "output.dense": ("ffn.linear2", ("ff",))}
LLAMA = {"self_attn.q_proj": ("self_attn.in_proj", ("query",)), "self_attn.k_proj": ("self_attn.in_proj", ("key",)),
         "self_attn.v_proj": ("self_attn.in_proj", ("value",)), "self_attn.o_proj": ("self_attn.out_proj", ("output",)),
         "mlp.gate_proj": ("ffn.linear1", ("ff",)), "mlp.up_proj": ("ffn.linear3", ("ff",)),
         "mlp.down_proj": ("ffn.linear2", ("ff",))}
# GPT-2's attention is one fused matrix, c_attn: peft adapts it whole (one A, one B of 3C rows); scratchformer adapts
# W^Q, W^K and W^V apart, so the same update is A three times and B's three row blocks
GPT2 = {"attn.c_attn": ("self_attn.in_proj", ("query", "key", "value")),
        "attn.c_proj": ("self_attn.out_proj", ("output",)), "mlp.c_fc": ("ffn.linear1", ("ff",)),
        "mlp.c_proj": ("ffn.linear2", ("ff",))}


def made(kind: str, folder: Path):
    """(transformers model, scratchformer model, layer prefixes (theirs, ours), module table), the same weights."""
    torch.manual_seed(0)
    if kind == "bert":
        hf = transformers.BertForSequenceClassification(transformers.BertConfig(
            **SMALL, max_position_embeddings=64, num_labels=3, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0))
        hf.save_pretrained(folder)
        ours = bert_from_pretrained(folder, n_classes=3, pooling="pooler")
        with torch.no_grad():
            ours.head.weight.copy_(hf.classifier.weight)
            ours.head.bias.copy_(hf.classifier.bias)
        return hf.eval(), ours.eval(), ("bert.encoder.layer.{i}.", "encoder.layers.{i}."), BERT
    if kind == "llama":
        hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL, num_key_value_heads=2,
                                                                    max_position_embeddings=64))
        table, prefixes = LLAMA, ("model.layers.{i}.", "decoder.layers.{i}.")
    else:
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4,
                                                                  n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                                                  attn_pdrop=0.0))
        table, prefixes = GPT2, ("transformer.h.{i}.", "decoder.layers.{i}.")
    hf.save_pretrained(folder)
    return hf.eval(), load_model(folder, dtype="float32"), prefixes, table


def adapted(kind: str, folder: Path):
    """Both models with LoRA on every projection; peft's adapters given random values (B too, so that the update
    is not zero) and copied into scratchformer's. Returns (peft model, ours, pairs of (peft layer, ours, targets))."""
    hf, ours, (theirs_at, ours_at), table = made(kind, folder)
    config = peft.LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.0, fan_in_fan_out=kind == "gpt2",
                             target_modules=sorted({k.split(".")[-1] for k in table}))
    wrapped = peft.get_peft_model(hf, config)
    add_lora(ours, R, ALPHA, "all")
    torch.manual_seed(1)
    pairs = []
    for i in range(2):
        for their_name, (our_name, targets) in table.items():
            theirs = wrapped.base_model.model.get_submodule(theirs_at.format(i=i) + their_name)
            mine = ours.get_submodule(ours_at.format(i=i) + our_name)
            assert isinstance(mine, LoRALinear)
            a, b = theirs.lora_A["default"].weight, theirs.lora_B["default"].weight
            with torch.no_grad():
                b.normal_(0, 0.5)
                row = 0
                for target in targets:
                    size = mine.lora_B[target].shape[0]
                    mine.lora_A[target].copy_(a)
                    mine.lora_B[target].copy_(b[row:row + size])
                    row += size
            pairs.append((theirs, mine, targets))
    return wrapped.eval(), ours.eval(), pairs


def logits(kind: str, model, ids: torch.Tensor, mask: torch.Tensor, is_peft: bool) -> torch.Tensor:
    if kind == "bert":
        return model(input_ids=ids, attention_mask=mask).logits if is_peft else model(ids, mask.bool())
    return model(input_ids=ids).logits if is_peft else model(ids)


@pytest.mark.parametrize("kind", ["gpt2", "bert", "llama"])
def test_the_same_adapters_give_peft_s_logits_and_gradients_and_merge_exactly(kind, tmp_path):
    wrapped, ours, pairs = adapted(kind, tmp_path / kind)
    torch.manual_seed(2)
    ids = torch.randint(0, V, (2, 11))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # BERT: a padded row
    theirs_out, ours_out = logits(kind, wrapped, ids, mask, True), logits(kind, ours, ids, mask, False)
    assert (theirs_out - ours_out).abs().max() < 1e-5
    plain = wrapped.get_base_model()
    with wrapped.disable_adapter():
        assert (logits(kind, plain, ids, mask, True) - theirs_out).abs().max() > 1e-3  # the adapters do something

    weights = torch.randn_like(theirs_out)
    (theirs_out * weights).sum().backward()
    (ours_out * weights).sum().backward()
    for theirs, mine, targets in pairs:
        a_grad = sum(mine.lora_A[t].grad for t in targets)  # GPT-2: the shared A's gradient is the sum of the three
        b_grad = torch.cat([mine.lora_B[t].grad for t in targets])
        theirs_a, theirs_b = theirs.lora_A["default"].weight.grad, theirs.lora_B["default"].weight.grad
        for want, have in ((theirs_a, a_grad), (theirs_b, b_grad)):
            assert (want - have).abs().max() <= 1e-5 * want.abs().max()  # float32 sums in another order

    merged = merge_lora(copy.deepcopy(ours))
    assert not any(isinstance(m, LoRALinear) for m in merged.modules())
    with torch.no_grad():
        assert (logits(kind, merged, ids, mask, False) - ours_out).abs().max() < 1e-5
        their_merged = wrapped.merge_and_unload()
        assert (logits(kind, their_merged, ids, mask, True) - ours_out).abs().max() < 1e-5


def test_lora_starts_as_the_base_model_and_only_the_adapters_get_gradients(tmp_path):
    """B starts at zero: the adapted model is the base model until it trains; the frozen weights get no gradient."""
    _, ours, _, _ = made("llama", tmp_path / "llama")
    ids = torch.randint(0, V, (2, 9))
    before = ours(ids)
    ours.requires_grad_(False)
    add_lora(ours, R, ALPHA, "query,value")
    after = ours(ids)
    assert torch.equal(before, after)
    after.sum().backward()
    with_grad = {n for n, p in ours.named_parameters() if p.grad is not None}
    assert with_grad and all(".lora_" in n for n in with_grad)
    assert {n.split(".lora_")[1] for n in with_grad} == {"A.query", "A.value", "B.query", "B.value"}
    grads = dict((n, p.grad) for n, p in ours.named_parameters() if p.grad is not None)
    assert all(g.abs().max() == 0 for n, g in grads.items() if ".lora_A." in n)  # B = 0 passes A nothing yet
    assert all(g.abs().max() > 0 for n, g in grads.items() if ".lora_B." in n)  # B learns first
