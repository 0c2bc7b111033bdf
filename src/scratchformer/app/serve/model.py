"""The model a server serves: a loaded checkpoint, what it can do (complete a text; chat, when it has a template),
and how a request's messages or text become the prompt's token ids."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scratchformer.checkpoints import Checkpoint, CheckpointError, load_checkpoint, run_of
from scratchformer.data.templates import Template, prompt_ids
from scratchformer.tasks.inference import chat_prompt_ids, encode_checked, generates_text, template_of


@dataclass
class ServedModel:
    """A checkpoint that writes text (``inference.generates_text``), its name in the API and its chat template
    (None: it serves completions only)."""

    ckpt: Checkpoint
    name: str
    template: Template | None
    created: int = field(default_factory=lambda: int(time.time()))
    context: int | None = None  # the positions a request may take (the engine's rows); None: the model's window
    _vocabulary: Any = field(default=None, repr=False)

    @property
    def max_len(self) -> int:
        """The positions a request's prompt and answer may take together: the server's context, at most the
        model's window."""
        return min(self.ckpt.model_config.max_len, self.context or self.ckpt.model_config.max_len)

    @property
    def stop_ids(self) -> frozenset[int]:
        """The tokens that end an answer: every end-of-generation id of the tokenizer (Llama 3.1 has three)."""
        return frozenset(self.ckpt.tokenizer.eos_ids)

    def chat_ids(self, messages: list[dict[str, Any]], tools: list[Any] | None = None) -> list[int]:
        """The prompt of a conversation, in the model's template (``inference.chat_prompt_ids``, as ``generate
        --instruction`` asks); ``tools``: the functions the template renders (a chat template's ``tools``)."""
        if not tools:
            return chat_prompt_ids(self.ckpt, messages, self.template)
        assert self.template is not None
        self.ckpt.tokenizer.check_known("".join(m["content"] for m in messages))
        return prompt_ids(self.ckpt.tokenizer, self.template, messages, tools=tools)

    def vocabulary(self) -> Any:
        """The tokenizer's tokens as a grammar reads them (``generation.grammar.Vocabulary``), made once."""
        if self._vocabulary is None:
            from scratchformer.generation.grammar import Vocabulary

            tok = self.ckpt.tokenizer
            self._vocabulary = Vocabulary(tok, self.ckpt.model_config.vocab_size, tuple(tok.eos_ids))
        return self._vocabulary

    def text_ids(self, text: str) -> list[int]:
        """The prompt of a completion: the text's ids (``generate --prompt``'s), or the bos token for no text."""
        return encode_checked(self.ckpt.tokenizer, text) or [self.ckpt.tokenizer.bos_id]

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids``; an id past the tokenizer's vocabulary (a model's table is often padded beyond it, as
        Qwen3's is) has none."""
        vocab = self.ckpt.tokenizer.vocab_size
        return self.ckpt.tokenizer.decode([i for i in ids if i < vocab])

    def card(self) -> dict[str, Any]:
        """The model's entry in ``GET /v1/models``: OpenAI's fields, then what a client may want to know."""
        template = None if self.template is None else self.template.name  # alpaca or chat
        return {"id": self.name, "object": "model", "created": self.created, "owned_by": "scratchformer",
                "context_window": self.max_len, "chat": self.template is not None, "template": template,
                "vocab_size": self.ckpt.tokenizer.vocab_size}


def model_name(path: str | Path) -> str:
    """The id a model is served under: its folder's name (a run's, not its ``best/`` checkpoint's)."""
    return run_of(Path(path).resolve()).name


def load_served(path: str | Path, name: str | None = None) -> ServedModel:
    """Load a checkpoint to serve; ``CheckpointError`` (one line) for a model that does not write text."""
    ckpt = load_checkpoint(path)
    if not generates_text(ckpt):
        ckpt.check_tokenizer("serve")
        raise CheckpointError(f"{path} holds a {type(ckpt.model).__name__}, which does not write text; 'serve' needs a "
                              "language model (a GPT run, an instruction-tuned or LoRA run, a Llama, Qwen3 or GPT-2 "
                              "folder)")
    return ServedModel(ckpt, name or model_name(path), template_of(ckpt))
