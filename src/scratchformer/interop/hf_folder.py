"""A Hugging Face folder (Llama, Qwen3, Mistral, Gemma 3, GPT-2) read as a scratchformer ``GPT``: data, never code.

    scratchformer.load_model("Qwen3-0.6B/")            # config.json, *.safetensors (sharded or not), tokenizer.json
                                                       # (with tokenizer_config.json ...: folder_tokenizer.py)
    scratchformer generate --ckpt Qwen3-0.6B/ --prompt "The Transformer"

A folder is read as data: ``config.json`` is parsed (no ``trust_remote_code``, no Python from the folder), weights
come from ``*.safetensors`` only (a ``*.bin`` file is a pickle, which can run code: refused), and every tensor's
shape is checked against the config before anything is allocated. The model is built on the ``meta`` device (no
memory) and the stored tensors are assigned to it as they are read (safetensors maps the files), in their stored
dtype (bfloat16 stays bfloat16) unless a ``dtype`` is asked for. Each weight is held once: used as stored, it stays
the mapped file's pages; W^Q, W^K and W^V, stacked into one matrix, are read into it with plain file reads
(``safetensors_files.read_stacked``), so that their mapped pages do not stay resident beside it.

Each architecture is a setting of the same blocks, not a second model (``ModelConfig``)::

    Llama    pre-norm RMSNorm, SwiGLU, rotary positions (rope_theta; Llama 3's "llama3" scaling), grouped-query
             attention (num_key_value_heads), no biases, output tied or not
    Qwen3    Llama's blocks, plus an RMSNorm over D on each head's queries and keys before the rotary positions
             (qk_norm with norm_type="rmsnorm"), and a head size D apart from d_model / n_heads (head_size)
    GPT-2    pre-norm LayerNorm, GELU (tanh), learned positions, biases, output tied (``huggingface.py``'s mapping)

Names, Llama and Qwen3 (theirs under ``model.``; ``i`` is the layer)::

    embed_tokens.weight                          embed.token.weight
    layers.i.input_layernorm.weight              decoder.layers.i.self_attn_block.norm.weight
    layers.i.self_attn.{q,k,v}_proj.weight       decoder.layers.i.self_attn.in_proj.weight  (stacked: [W^Q; W^K; W^V])
    layers.i.self_attn.o_proj.weight             decoder.layers.i.self_attn.out_proj.weight
    layers.i.self_attn.{q,k}_norm.weight         decoder.layers.i.self_attn.{q,k}_norm.weight  (Qwen3)
    layers.i.post_attention_layernorm.weight     decoder.layers.i.ffn_block.norm.weight
    layers.i.mlp.gate_proj / up_proj / down_proj decoder.layers.i.ffn.linear1 / linear3 / linear2  (SiLU(x W_1) * x W_3)
    norm.weight                                  decoder.norm.weight
    lm_head.weight (outside model.; untied)      lm_head.weight

Qwen3-MoE: Qwen3's blocks with a mixture of experts where its config says (``hf_moe.py``: the settings and names).
Mistral: Llama's blocks with a sliding window; Gemma 3: sliding and global layers, Gemma's norms and gate
(``hf_gemma.py``: the settings and names).

Refused, in one line: another architecture, a sliding window outside Mistral and Gemma 3, experts outside Qwen3-MoE, a
rotary scaling other than ``llama3``, a missing shard or a shard without the tensors its index names, a tensor of the
wrong shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scratchformer.interop.hf_gemma import GEMMA3_IMAGES, GEMMA3_LM, MISTRAL_LM, gemma_rope, gemma_settings, norm_names
from scratchformer.interop.hf_moe import QWEN3_MOE_LM, ffn_plan, moe_settings, n_experts
from scratchformer.models import GPT
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.embedding import RotaryEmbedding

ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen3ForCausalLM": "qwen3", "GPT2LMHeadModel": "gpt2",
                 QWEN3_MOE_LM: "qwen3_moe", GEMMA3_LM: "gemma3_text", MISTRAL_LM: "mistral"}
# What a GPT's settings are when it is a Llama (a Qwen3: a Llama with qk_norm): the one place this is decided. The
# reader builds these; the Hugging Face export (hf_llama.llama_problems) and the GGUF export check them.
LLAMA_SETTINGS: dict[str, Any] = {"norm": "pre", "norm_type": "rmsnorm", "activation": "swiglu",
                                  "positional": "rotary", "scale_embeddings": False, "embedding_norm": False,
                                  "attention": "softmax"}


class FolderError(ValueError):
    """A Hugging Face folder that cannot be read as one of the supported models (one line)."""


def is_hf_folder(path: str | Path) -> bool:
    """Whether ``path`` is a Hugging Face model folder (its ``config.json`` names an architecture or a model type)
    rather than a scratchformer checkpoint (whose ``config.json`` holds ``model`` and ``train``)."""
    try:
        meta = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "model" not in meta and ("architectures" in meta or "model_type" in meta)


def _architecture(hf: dict[str, Any], folder: Path) -> str:
    """The model type of a folder that ``load_folder`` reads (a Llama, Qwen3 or GPT-2): ``FolderError`` else."""
    hf_type = folder_type(hf)
    name = (hf.get("architectures") or [hf.get("model_type")])[0]
    if name == GEMMA3_IMAGES:
        raise FolderError(f"{folder} holds a {name} model (images and text); only the text model is read here: "
                          f"a {GEMMA3_LM} folder")
    if hf_type not in ARCHITECTURES.values():
        raise FolderError(f"{folder} holds a {name} model; supported: {', '.join(ARCHITECTURES)}")
    return hf_type


def folder_type(hf: dict[str, Any]) -> str:
    """A folder's ``model_type`` ("llama", "qwen3", "gpt2", "bert", ...), from its ``architectures`` where its
    ``config.json`` names one."""
    names = hf.get("architectures") or []
    return ARCHITECTURES.get(names[0], str(hf.get("model_type", ""))) if names else str(hf.get("model_type", ""))


def folder_config(folder: Path) -> tuple[dict[str, Any], str, ModelConfig]:
    """A folder's ``config.json``, its model type and the ``ModelConfig`` it describes (a BERT encoder's with two
    classes and mean pooling: its head is new), without reading a weight; ``FolderError`` for another kind."""
    from scratchformer.errors import ConfigError
    from scratchformer.interop.huggingface import bert_config

    try:
        hf = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        hf_type = folder_type(hf)
        if hf_type == "bert":
            return hf, hf_type, bert_config(hf)
        return hf, hf_type, model_config(hf, _architecture(hf, folder))
    except KeyError as err:
        raise FolderError(f"{folder / 'config.json'} lacks {err.args[0]!r}") from None
    except json.JSONDecodeError as err:
        raise FolderError(f"{folder / 'config.json'} is not valid JSON (line {err.lineno}, column {err.colno}: "
                          f"{err.msg})") from None
    except (ConfigError, ValueError, OSError) as err:
        raise FolderError(str(err) if isinstance(err, FolderError) else f"{folder / 'config.json'}: {err}") from None


def _rope(hf: dict[str, Any], family: str) -> tuple[float, dict[str, Any] | None]:
    """The rotary base and scaling, as ``transformers`` 4 writes them (``rope_theta``, ``rope_scaling``) or 5
    (``rope_parameters``); Gemma 3's global layers' (``hf_gemma.py``)."""
    params = gemma_rope(hf)[0] if family == "gemma3_text" else dict(hf.get("rope_parameters") or {})
    scaling = hf.get("rope_scaling") or (params if params.get("rope_type", "default") != "default" else None)
    base = float(params.get("rope_theta", hf.get("rope_theta", 10000.0)))
    if scaling is not None:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind != "llama3":
            raise FolderError(f"rope scaling of type {kind!r} is not supported; supported: llama3")
        scaling = {k: v for k, v in scaling.items() if k not in ("rope_theta", "type")} | {"rope_type": "llama3"}
    return base, scaling


def _refuse_variants(hf: dict[str, Any], family: str) -> None:
    if family not in ("mistral", "gemma3_text") and (hf.get("use_sliding_window") or hf.get("sliding_window") or
                                                       "sliding_attention" in (hf.get("layer_types") or [])):
        raise FolderError("sliding-window attention is not supported (every layer here attends to every earlier "
                          "token)")
    if family != "qwen3_moe" and any(hf.get(k) for k in ("num_experts", "num_local_experts", "n_routed_experts",
                                                          "moe_intermediate_size")):
        raise FolderError(f"mixture-of-experts {family} folders are not supported (experts: Qwen3MoeForCausalLM)")
    if family == "qwen3_moe" and not n_experts(hf):
        raise FolderError("a Qwen3-MoE config.json with num_experts=0 has no experts: save it as Qwen3ForCausalLM")
    if family != "gemma3_text" and hf.get("hidden_act", "silu") != "silu":
        raise FolderError(f"hidden_act={hf['hidden_act']!r} is not supported for {family} (SwiGLU uses silu)")
    if bool(hf.get("attention_bias", False)) != bool(hf.get("mlp_bias", False)):
        raise FolderError("attention_bias and mlp_bias differ; supported: both off (or both on)")


def model_config(hf: dict[str, Any], family: str) -> ModelConfig:
    """The ``ModelConfig`` of a Llama, Qwen3, Mistral or Gemma 3 ``config.json`` (GPT-2: ``gpt2_config``)."""
    if family == "gpt2":
        from scratchformer.interop.huggingface import gpt2_config

        return gpt2_config(hf)
    _refuse_variants(hf, family)
    C, H = hf["hidden_size"], hf["num_attention_heads"]
    kv = hf.get("num_key_value_heads") or H
    qwen3, gemma = family in ("qwen3", "qwen3_moe"), family == "gemma3_text"
    head_dim = hf.get("head_dim") or (128 if qwen3 else 256 if gemma else C // H)  # transformers' defaults
    base, scaling = _rope(hf, family)
    pad = hf.get("pad_token_id")
    more = moe_settings(hf) if family == "qwen3_moe" else gemma_settings(hf, head_dim) if gemma else {}
    if family == "mistral":
        more = dict(sliding_window=int(hf.get("sliding_window") or 0))
    return ModelConfig(**{
        **dict(arch="gpt", vocab_size=hf["vocab_size"], d_model=C, n_heads=H, n_layers=hf["num_hidden_layers"],
               d_ff=hf["intermediate_size"], max_len=hf.get("max_position_embeddings", 2048), dropout=0.0,
               n_kv_heads=None if kv == H else kv, head_size=None if head_dim * H == C else head_dim,
               **LLAMA_SETTINGS, tie_embeddings=bool(hf.get("tie_word_embeddings", gemma)),
               bias=bool(hf.get("attention_bias")),
               layer_norm_eps=float(hf.get("rms_norm_eps", 1e-6)), rope_base=base, rope_scaling=scaling,
               qk_norm=qwen3, pad_id=pad if isinstance(pad, int) and 0 <= pad < hf["vocab_size"] else 0),
        **more})


Plan = list[tuple[str, list[str], bool]]  # (our name, their names stacked in this order, transposed)


def llama_plan(cfg: ModelConfig) -> Plan:
    """Where each of our tensors comes from in a Llama or Qwen3 folder (module docstring)."""
    plan: Plan = [("embed.token.weight", ["model.embed_tokens.weight"], False),
                  ("decoder.norm.weight", ["model.norm.weight"], False)]
    kinds = ["weight", "bias"] if cfg.bias else ["weight"]
    for i in range(cfg.n_layers):
        o, p = f"decoder.layers.{i}.", f"model.layers.{i}."
        plan += [(o + f"{ours}.weight", [p + f"{theirs}.weight"], False)
                 for ours, theirs in norm_names(cfg.sandwich_norm)]
        for kind in kinds:
            plan += [(o + f"self_attn.in_proj.{kind}", [p + f"self_attn.{n}_proj.{kind}" for n in "qkv"], False),
                     (o + f"self_attn.out_proj.{kind}", [p + f"self_attn.o_proj.{kind}"], False)]
        plan += ffn_plan(cfg, i, kinds)  # the dense SwiGLU, or a Qwen3-MoE layer's router and experts (hf_moe.py)
        if cfg.qk_norm:
            plan += [(o + f"self_attn.{n}_norm.weight", [p + f"self_attn.{n}_norm.weight"], False) for n in "qk"]
    if not cfg.tie_embeddings:
        plan.append(("lm_head.weight", ["lm_head.weight"], False))
    return plan


IGNORED = (".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")  # buffers some folders keep: no weights


def _their_names(files: dict[str, Path], family: str) -> dict[str, str]:
    """The folder's tensor names as the plan names them (GPT-2's without ``transformer.``) -> as stored."""
    if family != "gpt2":
        return {n: n for n in files}
    return {n.removeprefix("transformer."): n for n in files}


def _checked(plan: Plan, own: dict[str, Tensor], stored: dict[str, tuple[int, ...]], names: dict[str, str],
             cfg: ModelConfig, family: str) -> None:
    """Every tensor the plan needs is there with the shape the config gives it, and nothing else is."""
    wanted: set[str] = set()
    for ours, theirs, transpose in plan:
        shape = tuple(own[ours].shape)
        if len(theirs) == 3:  # W^Q, W^K, W^V stacked: H D, H_kv D, H_kv D rows
            q, kv = cfg.n_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
            parts = [(rows, *shape[1:]) for rows in (q, kv, kv)]
        else:
            parts = [shape[::-1] if transpose else shape]
        for name, expected in zip(theirs, parts):
            wanted.add(name)
            if name not in names:
                raise FolderError(f"the folder has no tensor {name}, which a {family} model of this config.json needs")
            if stored[names[name]] != expected:
                raise FolderError(f"tensor {names[name]} has shape {list(stored[names[name]])}; config.json gives it "
                                  f"{list(expected)}")
    tied_copy = {"lm_head.weight"} if cfg.tie_embeddings else set()
    extra = sorted(n for n in set(names) - wanted - tied_copy if not n.endswith(IGNORED))
    if extra:
        raise FolderError(f"tensor {names[extra[0]]} is not part of a {family} model of this config.json "
                          f"({len(extra)} such)")


@contextmanager
def folder_tensors(path: str | Path) -> Iterator[tuple[ModelConfig, dict[str, Callable[[], Tensor]]]]:
    """``with folder_tensors(folder) as (config, tensors):`` the folder's model config and, for each of our tensor
    names, a function that reads it (stacked, transposed, as stored), one at a time: nothing is read until it is
    called. Checked first, shapes against the config; ``FolderError`` in one line."""
    from scratchformer.errors import ConfigError
    from scratchformer.interop.huggingface import gpt2_plan
    from scratchformer.interop.safetensors_files import WeightsError, read_stacked, reader, shapes, weight_map

    folder = Path(path)
    try:
        hf = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        family = _architecture(hf, folder)
        cfg = model_config(hf, family)
        files = weight_map(folder)
    except KeyError as err:
        raise FolderError(f"{folder / 'config.json'} lacks {err.args[0]!r}") from None
    except (ConfigError, WeightsError, ValueError) as err:
        raise FolderError(str(err) if isinstance(err, (FolderError, WeightsError)) else
                          f"{folder / 'config.json'}: {err}") from None
    plan = gpt2_plan(cfg) if family == "gpt2" else llama_plan(cfg)
    with torch.device("meta"):
        own = dict(GPT(cfg).state_dict())  # shapes only: no memory, no initialisation
    names = _their_names(files, family)
    _checked(plan, own, shapes(files), names, cfg, family)
    with reader(files) as read:
        def reading(theirs: list[str], transpose: bool) -> Callable[[], Tensor]:
            def tensor() -> Tensor:
                if len(theirs) > 1:  # W^Q, W^K, W^V: read into one new matrix, never mapped (each weight held once)
                    whole = read_stacked({names[n]: files[names[n]] for n in theirs}, [names[n] for n in theirs])
                else:  # the mapped file's own pages
                    whole = read(names[theirs[0]])
                return (whole.t() if transpose else whole).contiguous()
            return tensor

        yield cfg, {ours: reading(theirs, transpose) for ours, theirs, transpose in plan}


def load_folder(path: str | Path, dtype: torch.dtype | None = None) -> GPT:
    """The model of a Hugging Face folder, in eval mode (its tokenizer: ``folder_tokenizer.py``). ``dtype``: convert the
    weights (None: as stored). ``FolderError`` in one line for what cannot be read."""
    with folder_tensors(path) as (cfg, tensors):
        with torch.device("meta"):
            model = GPT(cfg)  # shapes only: no memory, no initialisation
        state: dict[str, Tensor] = {}
        for name, tensor in tensors.items():
            state[name] = tensor()
            dtype = dtype or state[name].dtype  # one dtype for the model: the embedding's (the first), or the asked
            state[name] = state[name].to(dtype)
        model.load_state_dict(state, assign=True)
    for module in model.modules():
        if isinstance(module, RotaryEmbedding):
            module.build_tables()
    return model.eval()


def gpt2_from_pretrained(model_dir: str | Path, dtype: torch.dtype = torch.float32) -> GPT:
    """Load a Hugging Face GPT-2 directory (``GPT2LMHeadModel.save_pretrained``) into ``GPT``: ``load_folder``, by
    ``huggingface.gpt2_plan``."""
    return load_folder(model_dir, dtype)
