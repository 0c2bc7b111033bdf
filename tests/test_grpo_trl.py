"""GRPO's loss equal to ``trl``'s ``GRPOTrainer`` on the same batch: random GPT-2 and Llama folders saved by
``transformers`` (the shared ``hf-trl`` pair, with a small byte-level BPE), the same prompts, the same answers (fed to
trl by replacing its ``_generate``, as its own tests do), the same rewards (a plain Python function), then the
advantages (trl's ``_generate_and_score_completions``), and the loss and the gradients of a step (trl's
``_compute_loss``, on a policy moved off the one that drew the answers, so that the ratio is not 1), for the loss
types ``grpo``, ``dr_grpo`` and ``dapo``, each with beta 0 and 0.04 and two updates per batch: all to 1e-5."""

from __future__ import annotations

import pytest
import torch

import scratchformer
from scratchformer.tasks.dpo_reference import dropout_off
from scratchformer.tasks.grpo_loss import group_advantages, surrogate, token_logps
from test_dpo_trl import their_names

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) builds the reference models")
trl = pytest.importorskip("trl", reason="a dev dependency: the GRPO reference implementation")
datasets = pytest.importorskip("datasets", reason="trl reads its prompts through datasets")

G, PROMPTS, BUDGET, EOS = 4, 2, 12, 0  # answers a prompt, prompts, the completion budget, the folders' end id


def reward(completions, **_) -> list[float]:
    """A plain Python reward: how many 'e's an answer writes (a spread within each group)."""
    return [float(c.count("e")) for c in completions]


def answers(tokenizer) -> tuple[list[list[int]], list[list[int]]]:
    """Prompts of one length (trl numbers a left-padded prompt's positions from its padding; ours, from its first
    token: equal lengths compare the same thing) and answers of several lengths, some ended by the end id."""
    prompts = [tokenizer.encode(t) for t in ("the quick brown fox", "then some more words")]
    n = min(map(len, prompts))
    prompts = [p[:n] for p in prompts]
    g = torch.Generator().manual_seed(3)
    out = []
    for i in range(PROMPTS * G):
        length = int(torch.randint(3, BUDGET + 1, (1,), generator=g))
        ids = torch.randint(1, 300, (length,), generator=g).tolist()
        out.append(ids[:-1] + [EOS] if i % 3 == 0 else ids)
    return prompts, out


def trainer_for(folder, out, loss_type: str, beta: float):
    from trl import GRPOConfig, GRPOTrainer

    tok = transformers.AutoTokenizer.from_pretrained(folder)
    args = GRPOConfig(output_dir=str(out / f"trl-{loss_type}-{beta}"), report_to="none", use_cpu=True, bf16=False,
                      num_generations=G, per_device_train_batch_size=PROMPTS * G, max_completion_length=BUDGET,
                      beta=beta, loss_type=loss_type, num_iterations=2, temperature=1.0, epsilon=0.2,
                      epsilon_high=0.28, scale_rewards="group", logging_steps=1,
                      disable_dropout=True)  # as task=grpo trains
    rows = [{"prompt": p} for p in ("the quick brown fox", "then some more words")]
    return GRPOTrainer(model=str(folder), reward_funcs=[reward], args=args,
                       train_dataset=datasets.Dataset.from_list(rows), processing_class=tok), tok


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_advantages_loss_and_gradients_equal_trl(name, beta, loss_type, shared_run, tmp_path):
    from scratchformer.interop.hf_folder import llama_plan
    from scratchformer.interop.huggingface import gpt2_plan

    folder = shared_run("hf-trl") / name
    trainer, tok = trainer_for(folder, tmp_path, loss_type, beta)
    prompts, completions = answers(tok)
    texts = tok.batch_decode(completions, skip_special_tokens=True)

    def fixed(batch_prompts):  # trl's _generate, replaced: the same answers every time
        ids = [prompts[i // G] for i in range(len(batch_prompts))]
        return ids, completions, None, texts, None, {}, None, []

    trainer._generate = fixed
    trainer.current_gradient_accumulation_steps = 1  # (set by trl's training loop; one micro-batch here)
    trainer.model.train()
    inputs = [{"prompt": p} for p in ("the quick brown fox", "then some more words") for _ in range(G)]
    batch = trainer._generate_and_score_completions(inputs)
    rewards = torch.tensor(reward(texts))
    torch.testing.assert_close(group_advantages(rewards, G, "group"), batch["advantages"], atol=1e-5, rtol=0)
    assert batch["advantages"].abs().max() > 0.1  # answers that differ within their groups
    # two updates per batch: the policy moved off the one that drew the answers (pi_old), so the ratio is not 1
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=generator))
    moved = tmp_path / "moved"
    trainer.model.save_pretrained(moved)
    theirs = trainer._compute_loss(trainer.model, batch)
    theirs.backward()
    # ours: the moved folder read by scratchformer, the same ids, old and reference log-probabilities
    policy = scratchformer.load_model(moved).train()
    dropout_off(policy)
    logps, _ = token_logps(policy, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"],
                           batch["completion_mask"], 1.0)
    old = batch.get("old_per_token_logps")
    assert old is not None and (logps.detach() - old).abs().max() > 1e-3  # a ratio that is not 1
    mask = batch["completion_mask"]
    out = surrogate(logps, old, batch.get("ref_per_token_logps"), batch["advantages"], mask, epsilon=0.2,
                    epsilon_high=0.28, beta=beta, loss_type=loss_type)
    count = {"grpo": len(mask), "dr_grpo": len(mask) * BUDGET, "dapo": float(batch["num_items_in_batch"])}[loss_type]
    ours = out.loss_sum / count
    ours.backward()
    assert abs(ours.item() - theirs.item()) < 1e-5 and abs(theirs.item()) > 1e-4
    plan, prefix = (gpt2_plan, "transformer.") if name == "gpt2" else (llama_plan, "")
    grads = their_names(plan, policy.config, {n: p.grad for n, p in trainer.model.named_parameters()}, prefix)
    own = dict(policy.named_parameters())
    for key, g in grads.items():
        torch.testing.assert_close(own[key].grad, g, atol=1e-5, rtol=0, msg=lambda m, key=key: f"{key}: {m}")
    assert max(g.abs().max().item() for g in grads.values()) > 1e-4  # gradients worth comparing
