"""Muon: the Newton-Schulz orthogonalisation against its definition, the split between Muon and AdamW, the
AdamW half against torch's, and a run trained and resumed with it."""

import torch

from conftest import tiny
from scratchformer import GPT, EncoderClassifier
from scratchformer.settings.config import TrainConfig
from scratchformer.train.muon import CUBIC, MuonAdamW, muon_groups, muon_parameters, newton_schulz
from scratchformer.train.optim import make_optimizer, set_lr


def test_quintic_newton_schulz_puts_singular_values_in_a_band_around_one():
    g = torch.randn(128, 512, generator=torch.Generator().manual_seed(0))
    s = torch.linalg.svdvals(newton_schulz(g))  # 5 steps of Muon's quintic
    assert s.min() > 0.6 and s.max() < 1.2, (s.min(), s.max())
    assert torch.linalg.svdvals(g / g.norm()).max() < 0.2  # ...from far below 1
    tall = torch.linalg.svdvals(newton_schulz(g.t()))  # a tall matrix: the same numbers
    torch.testing.assert_close(tall, s, atol=1e-4, rtol=1e-4)


def test_cubic_newton_schulz_approaches_the_polar_factor():
    g = torch.randn(64, 96, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    u, _, vt = torch.linalg.svd(g, full_matrices=False)
    polar = u @ vt  # the orthogonal matrix closest to g
    errors = [(newton_schulz(g, steps, CUBIC, eps=0) - polar).norm().item() for steps in (4, 8, 12, 16)]
    assert errors[0] > errors[1] > errors[2] > errors[3] and errors[3] < 1e-9, errors  # then exact


def test_muon_orthogonalises_the_layers_matrices_and_adamw_takes_the_rest():
    model = GPT(tiny("gpt", tie_embeddings=False))
    groups = muon_groups(model, lr=1e-3, muon_lr=0.02, weight_decay=0.1, betas=(0.9, 0.98), eps=1e-9)
    opt = MuonAdamW(groups, lr=1e-3)
    names = {id(p): n for n, p in model.named_parameters()}
    orthogonalised = sorted(names[id(p)] for p in muon_parameters(opt))
    assert orthogonalised == sorted(n for n, p in model.named_parameters()
                                    if p.dim() == 2 and n.startswith("decoder.layers."))
    split = {names[id(p)]: g["split"] for g in opt.param_groups if g["muon"] for p in g["params"]}
    assert split["decoder.layers.0.self_attn.in_proj.weight"] == 3 and split["decoder.layers.0.ffn.linear1.weight"] == 1
    set_lr(opt, 5e-4)  # one schedule for both: Muon's groups keep muon_lr / lr
    assert {g["lr"] for g in opt.param_groups} == {5e-4, 5e-4 * 20}
    classifier = EncoderClassifier(tiny("encoder"))
    kept = {n for n, p in classifier.named_parameters()} - {
        n for n, p in classifier.named_parameters() if any(p is q for q in muon_parameters(
            MuonAdamW(muon_groups(classifier, lr=1, muon_lr=1, weight_decay=0, betas=(0.9, 0.9), eps=1e-8), lr=1)))}
    assert "head.weight" in kept and "embed.token.weight" in kept  # head and embeddings: AdamW


def test_a_muon_step_is_the_orthogonalised_nesterov_momentum():
    w = torch.nn.Parameter(torch.randn(8, 32))
    start = w.detach().clone()
    opt = MuonAdamW([dict(params=[w], muon=True, lr=0.1, weight_decay=0.0, ns_dtype="float32")], lr=0.1)
    grads = [torch.randn(8, 32) for _ in range(2)]
    buf = torch.zeros(8, 32)
    expected = start.clone()
    for g in grads:
        w.grad = g.clone()
        opt.step()
        buf = 0.95 * buf + g
        expected -= 0.1 * newton_schulz(g + 0.95 * buf)  # 8 rows <= 32 columns: scale 1
    torch.testing.assert_close(w.detach(), expected, atol=1e-5, rtol=1e-5)


def test_one_batched_step_equals_each_matrix_stepped_alone():
    """The step orthogonalises every block of one (wide) shape in one batch: a tall matrix (transposed), a
    wide one of the same shape and a stacked in_proj (three blocks) move exactly as each would alone."""
    torch.manual_seed(0)
    shapes_splits = [((32, 8), 1), ((8, 32), 1), ((24, 8), 3), ((8, 8), 1)]
    together = [torch.nn.Parameter(torch.randn(*shape)) for shape, _ in shapes_splits]
    alone = [torch.nn.Parameter(p.detach().clone()) for p in together]
    groups = [dict(params=[p], muon=True, split=split, lr=0.05, weight_decay=0.1, ns_dtype="float32")
              for p, (_, split) in zip(together, shapes_splits)]
    opt = MuonAdamW(groups, lr=0.05)
    singles = [MuonAdamW([dict(g, params=[p])], lr=0.05) for g, p in zip(groups, alone)]
    for _ in range(3):
        for p, q in zip(together, alone):
            p.grad = torch.randn_like(p)
            q.grad = p.grad.clone()
        opt.step()
        for single in singles:
            single.step()
    for p, q in zip(together, alone):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-6)


def test_bfloat16_newton_schulz_stays_in_the_band():
    """Muon's authors run the iteration in bfloat16 (used here where the hardware multiplies it natively):
    the same band, and close to the float32 result."""
    g = torch.randn(128, 512, generator=torch.Generator().manual_seed(0))
    low = newton_schulz(g, dtype=torch.bfloat16)
    assert low.dtype == g.dtype
    s = torch.linalg.svdvals(low)
    assert s.min() > 0.55 and s.max() < 1.25, (s.min(), s.max())
    assert (low - newton_schulz(g)).norm() / newton_schulz(g).norm() < 0.05


def test_the_adamw_half_equals_torchs_adamw():
    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(5, 3))
    b.data.copy_(a.data)
    ours = MuonAdamW([dict(params=[a], lr=0.01, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.1)], lr=0.01)
    theirs = torch.optim.AdamW([b], lr=0.01, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.1)
    for _ in range(5):
        g = torch.randn(5, 3)
        a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        theirs.step()
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_optimizer_muon_trains_and_its_state_round_trips():
    torch.manual_seed(0)
    model = GPT(tiny("gpt"))
    opt = make_optimizer(model, TrainConfig(task="lm", optimizer="muon", lr=3e-3, muon_lr=0.02))
    assert isinstance(opt, MuonAdamW)
    ids = torch.randint(1, 37, (8, 17))
    losses = []
    for _ in range(30):
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    again = MuonAdamW(muon_groups(model, lr=3e-3, muon_lr=0.02, weight_decay=0.01, betas=(0.9, 0.98), eps=1e-9),
                      lr=3e-3)
    again.load_state_dict(opt.state_dict())
    p = next(muon_parameters(opt))
    torch.testing.assert_close(again.state[p]["momentum_buffer"], opt.state[p]["momentum_buffer"])
