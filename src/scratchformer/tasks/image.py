"""Image classification with a Vision Transformer: labelled images -> class.

The data layer lists the images (a folder of class sub-folders, or the digits) into rows held in memory
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

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data.images import as_input, to_pixels
from scratchformer.data.task_data import TaskData
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, Task, step_generator
from scratchformer.tasks.classify import class_scores


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

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None]) -> None:
        super().__init__(cfg, model, data, log)
        assert data.labels is not None
        self.labels = list(data.labels)
        self.channels, self.image_size = model.channels, model.image_size
        self.tokens_per_image = model.n_patches + 1  # the patches and the class token
        self.splits: dict[str, tuple[Tensor, Tensor]] = {}  # split -> (pixels (N, ch, S, S) uint8, labels (N,))
        for split, rows in self.views.items():
            shape = (0, self.channels, self.image_size, self.image_size)
            items = rows.values("image", range(len(rows)))
            pixels = [to_pixels(item, self.image_size, self.channels) for item in items]
            self.splits[split] = (torch.stack(pixels) if pixels else torch.zeros(shape, dtype=torch.uint8),
                                  torch.from_numpy(data.label_ids[split][:len(rows)]))
        if "train" in self.views:
            # every image is as long as every other: max_tokens, if set, counts its patches and class token
            self.batches = self.views["train"].batches([self.tokens_per_image] * self.split_size("train"), cfg)

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
        names, truths = self.views[split].texts("image", range(len(probs))), self.splits[split][1].tolist()
        lines = [f"{split} examples: predicted label, its probability, the true label"]
        for p, name, truth in zip(probs, names, truths):
            guess = int(p.argmax())
            mark = "ok " if guess == truth else "   "
            lines.append(f"{mark} {self.labels[guess]:>10} {p.max().item():.2f}  (true: {self.labels[truth]})  {name}")
        return lines
