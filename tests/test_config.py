import itertools

import pytest

from conftest import tiny
from scratchformer import ConfigError, ModelConfig, build_model, count_parameters_formula
from scratchformer.nn.model_presets import PRESETS
from scratchformer.settings.values import split_settings


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(set(PRESETS) - {"paper-big", "gpt2-small"}))
def test_preset_parameter_count_matches_formula(name):
    cfg = ModelConfig.preset(name)
    assert n_params(build_model(cfg)) == count_parameters_formula(cfg)


@pytest.mark.slow
def test_paper_models_are_near_the_papers_sizes():
    base, big = ModelConfig.preset("paper-base"), ModelConfig.preset("paper-big")
    # Table 3 of the paper: 65M and 213M with a shared 37k vocabulary.
    assert abs(count_parameters_formula(base) - 65e6) / 65e6 < 0.05
    assert abs(count_parameters_formula(big) - 213e6) / 213e6 < 0.05
    # ... and the formula is the real count (building "big" takes ~1 s).
    assert n_params(build_model(base)) == count_parameters_formula(base)
    assert n_params(build_model(big)) == count_parameters_formula(big)


def test_gpt2_small_has_gpt2s_parameter_count():
    assert count_parameters_formula(ModelConfig.preset("gpt2-small")) == 124_439_808  # GPT2LMHeadModel


@pytest.mark.parametrize(
    "arch,norm,activation,positional,bias,tie,shared,emb_norm",
    [c for c in itertools.product(["seq2seq", "gpt", "encoder"], ["post", "pre"], ["relu", "swiglu"],
                                  ["sinusoidal", "learned", "rotary", "none"], [True, False], [True, False],
                                  [True, False], [False, True])
     if (c[6] or c[0] == "seq2seq")][::7],
)
def test_formula_matches_every_architecture_choice(arch, norm, activation, positional, bias, tie, shared, emb_norm):
    cfg = ModelConfig(arch=arch, vocab_size=51, d_model=24, n_heads=4, n_layers=2, d_ff=40, max_len=30,
                      norm=norm, activation=activation, positional=positional, bias=bias, tie_embeddings=tie,
                      embedding_norm=emb_norm, n_classes=3,
                      tgt_vocab_size=None if shared else 43,
                      n_decoder_layers=3 if arch == "seq2seq" else None)
    assert n_params(build_model(cfg)) == count_parameters_formula(cfg)


@pytest.mark.parametrize("bias", [True, False])
def test_formula_counts_berts_pooler(bias):
    cfg = ModelConfig(arch="encoder", vocab_size=51, d_model=24, n_heads=4, n_layers=2, d_ff=40, max_len=30,
                      pooling="pooler", bias=bias)
    assert n_params(build_model(cfg)) == count_parameters_formula(cfg)
    assert count_parameters_formula(cfg) - count_parameters_formula(cfg.replace(pooling="cls")) == 24 * 24 + bias * 24


def test_family_defaults():
    gpt, s2s = ModelConfig(arch="gpt"), ModelConfig(arch="seq2seq")
    assert (gpt.norm, gpt.activation, gpt.positional, gpt.tie_embeddings, gpt.scale_embeddings) == \
        ("pre", "gelu", "learned", True, False)
    assert (s2s.norm, s2s.activation, s2s.positional, s2s.scale_embeddings) == ("post", "relu", "sinusoidal", True)
    assert s2s.n_encoder_layers == s2s.n_decoder_layers == s2s.n_layers


@pytest.mark.parametrize("kwargs,fields", [
    (dict(d_model=100, n_heads=8), ["d_model=100", "n_heads=8"]),
    (dict(norm="middle"), ["norm='middle'"]),
    (dict(activation="tanh"), ["activation='tanh'"]),
    (dict(positional="alibi"), ["positional='alibi'"]),
    (dict(attention="flash"), ["attention='flash'", "softmax, linear"]),
    (dict(dropout=1.5), ["dropout=1.5"]),
    (dict(vocab_size=0), ["vocab_size=0"]),
    (dict(n_heads=4, d_model=36, positional="rotary"), ["rotary", "d_model=36", "n_heads=4"]),
    (dict(d_model=64.0), ["d_model=64.0"]),
    (dict(arch="gpt", tgt_vocab_size=10), ["tgt_vocab_size", "arch='gpt'"]),
    (dict(pad_id=99, vocab_size=50), ["pad_id=99"]),
    (dict(arch="bert"), ["arch='bert'"]),
    (dict(arch="encoder", attention_window=-1), ["attention_window=-1"]),
    (dict(arch="gpt", attention_window=4), ["attention_window", "arch='gpt'"]),
])
def test_impossible_configs_fail_naming_the_fields(kwargs, fields):
    with pytest.raises(ConfigError) as err:
        ModelConfig(**kwargs)
    for f in fields:
        assert f in str(err.value)


def test_json_round_trip_and_unknown_keys():
    cfg = ModelConfig(arch="gpt", vocab_size=65, d_model=64, n_heads=4, n_layers=2, d_ff=128)
    assert ModelConfig.from_json(cfg.to_json()) == cfg
    with pytest.raises(ConfigError, match="d_modle"):
        ModelConfig.from_dict({**cfg.to_dict(), "d_modle": 3})
    with pytest.raises(ConfigError, match="unknown model preset"):
        ModelConfig.preset("paper-huge")
    assert cfg.replace(d_model=128).d_model == 128


def test_none_from_a_config_file_or_command_line_unsets_a_field_unless_it_is_one_of_its_choices():
    model, cfg = split_settings({"task": "classify", "positional": "none", "norm": "None", "dataset": "null"})
    assert model.positional == "none" and model.norm == "post" and cfg.dataset is None  # norm unset: the family's


def test_the_registry_may_list_more_than_one_family_for_a_task_and_the_settings_check_reads_it():
    """One place decides whether a model fits a task (``TaskSpec.family_for``), from the families the registry
    lists, the first being what a run builds when ``arch`` names none: a classifier is an encoder, or a GPT that
    reads its last real token (``arch=gpt-classifier``, or ``arch=gpt`` on a task of classes)."""
    model = split_settings({"task": "classify"})[0]
    assert model.arch == "encoder" and model.pooling == "mean"
    for arch in ("gpt", "gpt-classifier"):
        model = split_settings({"task": "classify", "arch": arch})[0]
        assert model.arch == "gpt-classifier" and model.pooling == "last"
    assert split_settings({"task": "lm", "arch": "gpt"})[0].arch == "gpt"
    with pytest.raises(ConfigError, match=r"arch='vit' does not fit task='classify' \(needs arch='encoder' or "
                                          r"arch='gpt-classifier' or arch='gpt'\)"):
        split_settings({"task": "classify", "arch": "vit"})
    with pytest.raises(ConfigError, match=r"arch='gpt' does not fit task='mlm' \(needs arch='encoder'\)"):
        split_settings({"task": "mlm", "arch": "gpt"})
    with pytest.raises(ConfigError, match="pooling='max' does not fit arch='gpt-classifier': it classifies from its "
                                          "last real token"):
        split_settings({"task": "classify", "arch": "gpt", "pooling": "max"})
    with pytest.raises(ConfigError, match=r"pooling='last' makes a classifier \(a GPT reading its last real token\); "
                                          r"task=lm builds a language model \(GPT\) and has no classes to learn"):
        split_settings({"task": "lm", "pooling": "last"})
    with pytest.raises(ConfigError, match="arch='bert' is not one of seq2seq, gpt, encoder, gpt-classifier, vit"):
        split_settings({"task": "classify", "arch": "bert"})


def test_a_config_in_the_older_form_of_a_gpt_classifier_reads_as_one():
    """Runs saved before the GPT classifier was a family wrote ``arch="gpt"`` with ``pooling="last"``."""
    cfg = ModelConfig.from_dict({**tiny("gpt").to_dict(), "pooling": "last"})
    assert (cfg.arch, cfg.pooling) == ("gpt-classifier", "last")
    assert ModelConfig.from_json(cfg.to_json()) == cfg


def test_every_form_of_data_has_its_reader_and_every_runner_its_class():
    from scratchformer.data.pipeline import READERS
    from scratchformer.registry import TASKS
    from scratchformer.tasks.build import RUNNERS

    assert {t.data.kind for t in TASKS.values()} <= set(READERS)
    assert all(t.runner in RUNNERS and RUNNERS[t.runner].__name__ == t.runner for t in TASKS.values())
