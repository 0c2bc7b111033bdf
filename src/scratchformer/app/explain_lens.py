"""``scratchformer explain --ckpt RUN --prompt TEXT`` (or ``--image FILE``): a trained checkpoint's prediction layer
by layer, as text: what it would predict after the embeddings and after each block (the logit lens,
``models/lens.py``), the numbers the explorer's page shows (``explore/lens_view.py``).

Every family the registry lists has a lens (``families.py``: its ``lens``): a language model's next token and an
encoder-decoder's decoder (over its beam-search output) at every position, a classifier's class probabilities
(an encoder's, a GPT classifier's, a ViT's, whose input is an image file read at the model's image size).
"""

from __future__ import annotations

from pathlib import Path

from scratchformer.app.explore.lens_view import classes_lens, lens_lines
from scratchformer.app.explore.model_view import DEFAULT_LIMITS, Limits, checkpoint_name, class_labels, explore
from scratchformer.checkpoints import Checkpoint, load_checkpoint
from scratchformer.errors import ConfigError
from scratchformer.families import family

__all__ = ["explain_lens"]


def explain_lens(path: str, prompt: str | None = None, limits: Limits = DEFAULT_LIMITS, *,
                 image: str | None = None) -> str:
    """A trained checkpoint's prediction layer by layer for ``prompt`` (a GPT's prompt, an encoder-decoder's
    source, whose decoder reads its beam-search translation, or a classifier's text), within the explorer's
    ``limits``; for a model that reads pixels, for the ``image`` file. The lines ``lens_view.lens_lines`` makes
    of the explorer's own numbers."""
    ckpt = load_checkpoint(path)
    entry = family(ckpt.model_config.arch)
    where = f"a {ckpt.extra['hf_architecture']} folder" if "folder" in ckpt.extra else f"step {ckpt.step}"
    header = f"{checkpoint_name(path)}: {entry.title}, {ckpt.model_config.norm}-LN, {where}"
    if entry.reads_pixels:
        if image is None or prompt is not None:
            raise ConfigError(f"explain --ckpt of {entry.title} reads an image: explain --ckpt RUN --image FILE")
        return "\n".join(_image_lens(ckpt, header, image))
    if prompt is None or image is not None:
        raise ConfigError(f"explain --ckpt of {entry.title} reads text: explain --ckpt RUN --prompt TEXT")
    ckpt.check_tokenizer("explain")
    result = explore(ckpt, prompt, limits, **({"max_new_tokens": 0} if entry.generates else {}))
    lines = [header, f"input: {len(result['tokens'])} tokens {' '.join(repr(t) for t in result['tokens'])}"]
    if entry.translates:
        out = result["translation"]
        lines.append(f"the decoder reads <bos> and the beam-search output ({out['text']!r}), one position a token")
    return "\n".join([*lines, "", *lens_lines(result["lens"])])


def _image_lens(ckpt: Checkpoint, header: str, image: str) -> list[str]:
    """The lines of an image classifier's lens on one image file."""
    from scratchformer.data.images import as_input, read_image

    cfg = ckpt.model_config
    pixels = as_input(read_image(image, cfg.image_size, cfg.channels)).unsqueeze(0)  # (1, ch, S, S)
    view = classes_lens(ckpt, pixels, class_labels(ckpt))
    what = (f"input: {Path(image).name} read as {cfg.image_size} x {cfg.image_size} x {cfg.channels}: "
            f"{cfg.n_patches} patches of {cfg.patch_size} x {cfg.patch_size} and the class token")
    return [header, what, "", *lens_lines(view)]
