"""Images as data: a folder of class sub-folders (classes from the sub-folders' names, other files skipped, a
damaged image refused in one line naming it), decoding and resizing, a stratified validation split, and the
digits' fixed split."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scratchformer.data.images import as_input, read_image, read_image_folder, to_pixels
from scratchformer.data.named import SHAPES
from scratchformer.data.pipeline import load_data
from scratchformer.data.roles import DataFiles
from scratchformer.data.task_data import TaskData
from scratchformer.errors import DataError
from scratchformer.registry import spec


def load_splits(files, *, val_fraction: float, seed: int) -> SimpleNamespace:
    """The image task's data from ``files``: each split's ``(image file, label id)`` rows, and its origin."""
    cfg = SimpleNamespace(dataset=None, data_dir=None, val_fraction=val_fraction, seed=seed)
    data = load_data(spec("image"), cfg, files, training=False)
    assert isinstance(data, TaskData) and data.tokenizer is None  # one type for every task's data; pixels, no ids
    rows = {split: list(zip(view.values("image", range(len(view))), data.label_ids[split].tolist()))
            for split, view in data.views.items()}
    return SimpleNamespace(rows=rows, origin=data.origin)

Image = pytest.importorskip("PIL.Image", reason="images need Pillow (pip install -e \".[images]\")")


def write_image(path: Path, pixels: np.ndarray) -> Path:
    """``pixels``: (H, W) grey or (H, W, 3) RGB bytes; the format follows the suffix (.png, .jpg)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels.astype(np.uint8)).save(path)
    return path


def image_folder(root: Path, counts: dict[str, int], size: int = 6) -> Path:
    """A folder of class sub-folders, ``counts[class]`` PNG images in each, every class a different shade."""
    for k, (name, n) in enumerate(counts.items()):
        for i in range(n):
            write_image(root / name / f"{i:03}.png", np.full((size, size, 3), 40 * k + i, dtype=np.uint8))
    return root


def test_classes_are_the_sub_folders_sorted_and_other_files_are_skipped_with_a_note(tmp_path):
    root = image_folder(tmp_path / "data", {"2": 2, "10": 1, "7": 3})
    write_image(root / "7" / "UPPER.JPEG", np.zeros((4, 4, 3)))  # any letter case
    (root / "7" / "readme.txt").write_text("not an image")
    (root / ".cache").mkdir()  # hidden: not a class
    notes: list[str] = []
    rows, names = read_image_folder(root, notes=notes)
    assert names == ["2", "7", "10"]  # numeric names sorted as numbers
    assert Counter(label for _, label in rows) == {0: 2, 1: 4, 2: 1}
    assert all(Path(f).parent.name == names[label] for f, label in rows)
    assert notes == [f"{root}: skipped 1 file(s) that are not PNG or JPEG images"]


@pytest.mark.parametrize("make,words", [
    (lambda r: write_image(r / "a.png", np.zeros((4, 4))), ["a.png is directly in", "sub-folder"]),
    (lambda r: (r / "cats").mkdir(parents=True), ["cats holds no PNG or JPEG images"]),
    (lambda r: r.mkdir(), ["has no sub-folders"]),
])
def test_a_malformed_folder_is_refused_in_one_line(tmp_path, make, words):
    root = tmp_path / "data"
    make(root)
    with pytest.raises(DataError) as err:
        read_image_folder(root)
    assert "\n" not in str(err.value)
    for word in words:
        assert word in str(err.value)


def test_a_class_the_training_folder_lacks_is_refused(tmp_path):
    root = image_folder(tmp_path / "test", {"cat": 1, "emu": 1})
    with pytest.raises(DataError, match="unknown class 'emu'; expected one of"):
        read_image_folder(root, label_names=["cat", "dog"])
    rows, names = read_image_folder(image_folder(tmp_path / "val", {"dog": 2}), label_names=["cat", "dog"])
    assert names == ["cat", "dog"] and {label for _, label in rows} == {1}  # a folder may lack a class


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, b"", b"GIF89a not a png"])
def test_a_damaged_image_is_refused_in_one_line_naming_it(tmp_path, content):
    bad = tmp_path / "broken.png"
    bad.write_bytes(content)
    with pytest.raises(DataError) as err:
        read_image(bad, 8, 3)
    assert str(err.value).startswith(f"{bad} is not a readable PNG or JPEG image (") and "\n" not in str(err.value)


def test_a_truncated_jpeg_is_refused_naming_it(tmp_path):
    good = write_image(tmp_path / "photo.jpg", np.random.default_rng(0).integers(0, 255, (64, 64, 3)))
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    assert read_image(good, 8, 3).shape == (3, 8, 8)
    with pytest.raises(DataError, match="cut.jpg is not a readable PNG or JPEG image"):
        read_image(cut, 8, 3)


def test_images_are_resized_and_converted_to_the_models_channels(tmp_path):
    rgb = np.zeros((10, 20, 3), dtype=np.uint8)
    rgb[:, :10] = (200, 0, 0)  # left half red, right half black
    path = write_image(tmp_path / "wide.png", rgb)
    pixels = read_image(path, 8, 3)  # stretched to 8 x 8: the left half stays left
    assert pixels.shape == (3, 8, 8) and pixels.dtype == torch.uint8
    assert (pixels[0, :, :3] == 200).all() and (pixels[0, :, 5:] == 0).all() and (pixels[1:] == 0).all()
    grey = read_image(path, 4, 1)
    assert grey.shape == (1, 4, 4)
    assert grey[0, 0, 0] == round(0.299 * 200) and grey[0, 0, 3] == 0  # ITU-R 601 luminance, as Pillow's "L"
    assert torch.equal(as_input(pixels), pixels.float() / 255)


def test_pixels_in_memory_take_the_same_path_as_files():
    digit = torch.tensor([[0, 255], [128, 64]], dtype=torch.uint8).view(1, 2, 2)
    rgb = to_pixels(digit, 2, 3)
    assert rgb.shape == (3, 2, 2) and all(torch.equal(rgb[c], digit[0]) for c in range(3))
    assert torch.equal(to_pixels(rgb, 2, 1), digit)
    assert to_pixels(digit, 4, 1).shape == (1, 4, 4)


def test_validation_carved_from_a_folder_is_a_seeded_stratified_sample(tmp_path):
    root = image_folder(tmp_path / "data", {"a": 20, "b": 10})
    files = DataFiles.of([str(root)])
    splits = load_splits(files, val_fraction=0.2, seed=3)
    assert Counter(y for _, y in splits.rows["val"]) == {0: 4, 1: 2}  # each class keeps its share
    assert not {f for f, _ in splits.rows["val"]} & {f for f, _ in splits.rows["train"]}
    assert splits.rows == load_splits(files, val_fraction=0.2, seed=3).rows
    assert splits.rows["val"] != load_splits(files, val_fraction=0.2, seed=4).rows["val"]
    assert "stratified by label, seed 3" in splits.origin["val"]


def test_image_data_must_be_a_folder(tmp_path):
    text = tmp_path / "labels.tsv"
    text.write_text("a\t1\n")
    with pytest.raises(DataError, match="labels.tsv is a file; task=image takes a folder with one sub-folder"):
        load_splits(DataFiles.of([str(text)]), val_fraction=0.1, seed=0)


def test_the_digits_split_is_fixed_stratified_and_disjoint():
    pytest.importorskip("sklearn", reason="the digits come with scikit-learn (pip install -e \".[images]\")")
    from scratchformer.data.images import load_digits

    digits = load_digits()
    assert {k: len(v) for k, v in digits.items()} == {"train": 1295, "val": 143, "test": 359}
    assert all(x.shape == (1, 8, 8) and x.dtype == torch.uint8 for x, _ in digits["test"])
    test = Counter(y for _, y in digits["test"])
    assert set(test) == set(range(SHAPES["digits"]["classes"]))
    assert max(test.values()) - min(test.values()) <= 2  # ~36 of each digit
    from sklearn.datasets import load_digits as sklearn_digits

    raw = sklearn_digits()  # every image in exactly one split: the splits' union is the dataset
    whole = Counter(bytes(np.round(x * 255 / 16).astype(np.uint8)) + bytes([y]) for x, y in zip(raw.images, raw.target))
    assert Counter(bytes(x.numpy()) + bytes([y]) for split in digits.values() for x, y in split) == whole
    again = load_digits()
    assert all(torch.equal(a, b) and y == z for (a, y), (b, z) in zip(digits["test"], again["test"]))
