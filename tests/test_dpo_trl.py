"""DPO equal to ``trl``'s ``DPOTrainer`` on the same batch of preference records: random GPT-2 and Llama folders saved
by ``transformers`` (with a small byte-level BPE this test writes), the records read by both, then the tokens, each
answer's log-probability under the reference and under a moved policy, the loss, the rewards, their margin and
accuracy, and the gradients of a step, all to 1e-5 (the log-probabilities, sums of about 100 nats, to 1e-5 or 1e-6 of
their size). trl computes its loss in ``DPOTrainer._compute_loss`` and the
reference's log-probabilities in ``compute_ref_log_probs``: the test calls them on trl's own collated batch."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import scratchformer
from scratchformer.data.templates import Template
from scratchformer.tasks.dpo import answer_logps
from scratchformer.tasks.dpo_reference import dropout_off
from test_dpo import PREFERENCES, dpo_task

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) builds the reference models")
trl = pytest.importorskip("trl", reason="a dev dependency: the DPO reference implementation")
datasets = pytest.importorskip("datasets", reason="trl reads its records through datasets")

V = 300
BETA = 0.1
# an answer's log-probability is a sum of 10 to 20 tokens' (50 to 120 nats): 1e-5, or 1e-6 of it where float32's own
# step at that size (7.6e-6 at 100) leaves no room for another summation order
SUMS = dict(atol=1e-5, rtol=1e-6)


def write_folder(model, folder: Path) -> Path:
    """``model`` saved with a byte-level BPE of V tokens whose end-of-text token is id 0 (the config's eos)."""
    from chat_folders import write_tokenizer

    model.save_pretrained(folder)
    write_tokenizer(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>"}))
    return folder


def made(name: str):
    """A random GPT-2 or Llama of V tokens, drawn after seed 0 (``shared_run("hf-trl")`` holds both, saved)."""
    torch.manual_seed(0)
    if name == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=256, bos_token_id=0, eos_token_id=0))
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False, bos_token_id=0,
        eos_token_id=0))


def their_step(folder: Path, records: list[dict], out: Path):
    """trl's trainer on ``records`` (its standard form: the prompt text as our template writes it), its policy
    moved off the reference by seeded noise; returns (trainer, its batch of every record, the moved folder)."""
    from trl import DPOConfig, DPOTrainer

    tok = transformers.AutoTokenizer.from_pretrained(folder)
    alpaca = Template("alpaca")
    rows = [{"prompt": alpaca.split({**r, "output": r["chosen"]})[0], "chosen": r["chosen"], "rejected": r["rejected"]}
            for r in records]
    args = DPOConfig(output_dir=str(out / "trl"), report_to="none", use_cpu=True, bf16=False, beta=BETA,
                     per_device_train_batch_size=len(rows), max_length=None, dataset_num_proc=None)
    trainer = DPOTrainer(model=str(folder), args=args, train_dataset=datasets.Dataset.from_list(rows),
                         processing_class=tok)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    moved = out / "moved"
    trainer.model.save_pretrained(moved)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(rows))])
    return trainer, batch, moved


def their_names(plan, cfg, grads: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """trl's gradients under our names, through the loader's own name plan (Q, K, V stacked; Conv1D transposed)."""
    out = {}
    for ours, theirs, transposed in plan(cfg):
        parts = [grads[prefix + t] for t in theirs]
        g = parts[0] if len(parts) == 1 else torch.cat(parts)
        out[ours] = g.t() if transposed else g
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_log_probabilities_loss_rewards_and_gradients_equal_trl(name, shared_run, tmp_path):
    from scratchformer.interop.hf_folder import llama_plan
    from scratchformer.interop.huggingface import gpt2_plan

    folder = shared_run("hf-trl") / name  # write_folder(made(name)), made once per test run; read-only
    records = PREFERENCES[:6]
    trainer, batch, moved = their_step(folder, records, tmp_path)
    # ours: the same records read by task=dpo from the folder, the reference precomputed from it
    task = dpo_task(records, tmp_path, init_from=str(folder), template="alpaca")
    base = scratchformer.load_model(folder)
    task.start(base, None, False)
    rows = task.rows["train"]
    n = len(records)
    assert [trainer.train_dataset[i]["prompt_ids"] for i in range(n)] == rows.fields["prompt"]
    assert [trainer.train_dataset[i]["chosen_ids"] for i in range(n)] == rows.fields["chosen"]
    assert [trainer.train_dataset[i]["rejected_ids"] for i in range(n)] == rows.fields["rejected"]
    ours_batch = task.examples("train", range(n))
    # the reference's log-probability of each answer: trl's compute_ref_log_probs on trl's batch
    ref_chosen, ref_rejected = trainer.compute_ref_log_probs(trainer.ref_model, batch)
    torch.testing.assert_close(ours_batch["ref"], torch.stack([ref_chosen, ref_rejected], 1), **SUMS)
    # the moved policy's: the same computation of trl's on its policy
    policy = scratchformer.load_model(moved).train()
    dropout_off(policy)
    with torch.no_grad():
        pol_chosen, pol_rejected = trainer.compute_ref_log_probs(trainer.model, batch)
        torch.testing.assert_close(answer_logps(policy, ours_batch), torch.stack([pol_chosen, pol_rejected], 1),
                                   **SUMS)
    # the loss, its metrics and the gradients of a step
    trainer.model.train()
    theirs = trainer._compute_loss(trainer.model, batch, False)
    theirs.backward()
    ours = task.loss_sum(policy, ours_batch, 0.0) / task.count(ours_batch)
    ours.backward()
    assert abs(ours.item() - theirs.item()) < 1e-5 and abs(ours.item() - math.log(2)) > 1e-3  # a moved policy
    logged = {k: v[-1] for k, v in trainer._metrics["train"].items()}
    mine = task.train_metrics()
    for key, trl_key in (("reward_chosen", "rewards/chosen"), ("reward_rejected", "rewards/rejected"),
                         ("reward_margin", "rewards/margins"), ("reward_accuracy", "rewards/accuracies"),
                         ("logp_chosen", "logps/chosen"), ("logp_rejected", "logps/rejected")):
        assert mine[key] == pytest.approx(logged[trl_key], abs=SUMS["atol"], rel=SUMS["rtol"]), key
    plan, prefix = (gpt2_plan, "transformer.") if name == "gpt2" else (llama_plan, "")
    grads = their_names(plan, policy.config, {n: p.grad for n, p in trainer.model.named_parameters()}, prefix)
    own = dict(policy.named_parameters())
    for key, g in grads.items():
        torch.testing.assert_close(own[key].grad, g, atol=1e-5, rtol=0, msg=lambda m, key=key: f"{key}: {m}")
    assert max(g.abs().max().item() for g in grads.values()) > 1e-3  # gradients worth comparing
