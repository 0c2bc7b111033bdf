"""Image classification with a Vision Transformer: labelled images -> class.

The data layer lists the images (a folder of class sub-folders, or the digits) into in-memory ``Splits``
(``data.image_splits``: images are small, and are never prepared into a corpus on disk as text is); this task
decodes every split once at the model's ``image_size`` and ``channels``, keeps the pixels as bytes, and
batches them: ``{"images": (B, ch, R, R) uint8, "labels": (B,)}`` (R = ``image_size``), scaled to [0, 1] only
when the model reads them. There is no tokenizer (``self.tokenizer is None``): a ViT's input is its pixels.

Training images can be shifted at random (``augment_shift=K``: up to K pixels in each direction, zeros filling
in), a new shift for every image at every step, drawn from ``(seed, step)`` like every other random choice,
so a resumed run sees the same batches. Evaluation reports the loss (mean negative log-probability of the
true class), accuracy and macro-F1, as text classification does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data.image_splits import Splits
from scratchformer.data.images import as_input, to_pixels
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, EpochBatches, Task, step_generator
from scratchformer.tasks.classify import class_scores
from scratchformer.tokenizers import Tokenizer


def shift_images(images: Tensor, max_shift: int, gen: torch.Generator) -> Tensor:
    """Each image ``(B, ch, R, R)`` moved by its own random (dy, dx) in [-max_shift, max_shift]; zeros fill in."""
    if max_shift <= 0:
        return images
    B, _, R, _ = images.shape
    k = max_shift
    padded = F.pad(images, (k, k, k, k))  # (B, ch, R + 2k, R + 2k)
    offsets = torch.randint(0, 2 * k + 1, (B, 2), generator=gen).tolist()  # top-left corner of each crop
    return torch.stack([padded[i, :, y:y + R, x:x + R] for i, (y, x) in enumerate(offsets)])


class ImageTask(Task):
    """Labelled images -> class, for ``arch="vit"``."""

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: Splits, log: Callable[[str], None],
                 tokenizer: Tokenizer | None = None) -> None:
        super().__init__(cfg, model, data, log, tokenizer)
        assert data.labels is not None
        self.labels = list(data.labels)
        self.channels, self.image_size = model.channels, model.image_size
        self.tokens_per_image = model.n_patches + 1  # the patches and the class token
        self.items = {split: self._limited(split, rows) for split, rows in data.rows.items()}
        self.splits: dict[str, tuple[Tensor, Tensor]] = {}  # split -> (pixels (N, ch, S, S) uint8, labels (N,))
        for split, rows in self.items.items():
            shape = (0, self.channels, self.image_size, self.image_size)
            pixels = [to_pixels(item, self.image_size, self.channels) for item, _ in rows]
            self.splits[split] = (torch.stack(pixels) if pixels else torch.zeros(shape, dtype=torch.uint8),
                                  torch.tensor([y for _, y in rows], dtype=torch.long))
        self.extra_meta = {"labels": self.labels}
        if "train" in self.splits:
            # every image is as long as every other: max_tokens, if set, counts its patches and class token
            self.batches = EpochBatches([self.tokens_per_image] * self.split_size("train"), cfg)

    def _limited(self, split: str, rows: list[Any]) -> list[Any]:
        """``train_limit`` / ``eval_limit`` applied to a split's rows (a quick run on a slice of the data)."""
        limit = self.cfg.train_limit if split == "train" else self.cfg.eval_limit
        return rows[:limit] if limit else rows

    def model_fields(self) -> dict[str, Any]:
        return {"n_classes": len(self.labels)}

    def data_notes(self) -> list[str]:
        return self.data.notes

    def has_split(self, split: str) -> bool:
        return split in self.splits

    def split_size(self, split: str) -> int:
        return len(self.splits[split][1])

    def global_batch(self, step: int) -> Batch:
        idx = torch.tensor(self.batches(step))
        pixels, labels = self.splits["train"]
        images = shift_images(pixels[idx], self.cfg.augment_shift, step_generator(self.cfg.seed, step, salt=29))
        return {"images": images, "labels": labels[idx]}

    def count(self, batch: Batch) -> int:
        return batch["labels"].numel()

    def n_tokens(self, batch: Batch) -> int:
        return self.count(batch) * self.tokens_per_image

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logits = model(as_input(batch["images"]))
        return F.cross_entropy(logits.float(), batch["labels"], label_smoothing=label_smoothing, reduction="sum")

    @torch.no_grad()
    def probabilities(self, model: nn.Module, split: str) -> Tensor:
        """The model's class probabilities ``(N, n_classes)`` for the images of ``split``, in order."""
        pixels = self.splits[split][0]
        device = next(model.parameters()).device
        out = [model(as_input(pixels[i:i + 256].to(device))).float().softmax(-1).cpu()
               for i in range(0, len(pixels), 256)]
        return torch.cat(out) if out else torch.zeros(0, len(self.labels))

    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        return class_scores(self.probabilities(model, split), self.splits[split][1].tolist(), len(self.labels))

    def samples(self, model: nn.Module) -> list[str]:
        split = self.sample_split()
        probs = self.probabilities(model, split)[:8]
        lines = [f"{split} examples: predicted label, its probability, the true label"]
        for i, (p, (item, truth)) in enumerate(zip(probs, self.items[split])):
            guess = int(p.argmax())
            name = Path(item).name if isinstance(item, str) else f"{split} image {i}"
            mark = "ok " if guess == truth else "   "
            lines.append(f"{mark} {self.labels[guess]:>10} {p.max().item():.2f}  (true: {self.labels[truth]})  {name}")
        return lines
