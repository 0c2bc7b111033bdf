"""The decoding engine's KV cache: one cache row per answer being decoded, each row at its own length.

``KVCache`` (``nn/kv_cache.py``) holds a batch whose rows all have one length, what ``generate`` needs: its prompts
start together (left padding makes them equally long) and end together. A server cannot wait for that. A request
arrives while others are half-way through their answers, and one that is done leaves while the rest go on. So here:

- each layer keeps one preallocated ``(R, H_kv, W, D)`` tensor of keys and one of values, and its rows ``0 .. n-1``
  are the ``n`` live sequences (R: the most at once; W: the longest sequence so far, grown by doubling, at most
  ``max_len``);
- each row has its own length. A step writes each row's new key and value at that row's own position (its length),
  and the attention mask lets each row see its own ``length + 1`` keys and nothing after them;
- the prompts that join in a step are prefilled together (in one pass, through an ordinary ``KVCache`` of that
  batch), then each copied into row ``n``; an answer that shares another's prompt (``n`` answers to one request) is
  a copy of that row (``fork``): the prompt is read once; one that leaves is replaced by the last row (one row
  copied, the others untouched), so the live rows stay ``0 .. n-1`` and a step reads a plain slice of the cache.

    step:  tokens (n, 1), positions (n, 1) = each row's length, key_mask (n, W') with W' = longest + 1
           -> every layer writes row i's key at column length_i and attends over its first length_i + 1 columns

A sliding-window layer (``nn/sliding_window.py``) needs only its window's last W positions: its rows are a ring of
W columns, fixed at start (position p at column p mod W), so its memory does not grow with the answers. A step writes
each row's key over the one W positions back, and attends over the whole ring (or, while a row is shorter than W, its
first length + 1 columns): keys in any order give the same attention, each carrying its rotation already. The
prefill is read with every position kept (``new_cache(windows=False)``), and each row's last W of them copied in.
Prefix reuse is off for such a model: a kept ring holds its answer's last W positions, not those of a shorter
beginning (``KVPool.reuses_prefixes``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from scratchformer.nn.kv_cache import DecoderCache, KVCache
from scratchformer.nn.sliding_window import WindowKVCache

__all__ = ["KVPool", "RingKVCache", "RowKVCache"]


def _position_bytes(cache: KVCache) -> int:
    """One position's key and value in a layer of ``cache``'s shape."""
    return 2 * cache.keys.size(1) * cache.keys.size(3) * cache.keys.element_size()


class RowKVCache(KVCache):
    """One layer's keys and values of a ``KVPool``: a ``KVCache`` whose rows each have their own length (so
    attention takes it as a cache). ``update(k, v)`` takes one new position per row, ``(n, H_kv, 1, D)``."""

    def __init__(self, pool: KVPool, keys: Tensor, values: Tensor) -> None:  # no super(): storage is given
        self.pool, self.keys, self.values = pool, keys, values

    @property
    def length(self) -> int:  # type: ignore[override]  # the longest row: what the model checks against max_len
        return max(self.pool.lengths, default=0)

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write row i's new key and value at its own position; return every row's first ``W'`` columns (a row
        reads only its own ``length + 1`` of them: the step's key mask says which)."""
        if k.size(2) != 1:
            raise ValueError(f"a pool takes one new position per row, got {k.size(2)}")
        n, at = k.size(0), self.pool.at  # (n,) each row's position
        rows = torch.arange(n, device=k.device)
        self.keys[rows, :, at] = k[:, :, 0]  # (n, H_kv, D) into column at[i] of row i
        self.values[rows, :, at] = v[:, :, 0]
        width = self.pool.step_width
        return self.keys[:n, :, :width], self.values[:n, :, :width]

    def reset(self) -> None:
        self.pool.lengths.clear()

    def reorder(self, index: Tensor) -> None:
        """Refused: a row's length lives in its ``KVPool``, so rows move only through ``KVPool.add``, ``fork`` and
        ``remove`` (``KVCache.reorder`` would move the keys and leave the lengths behind)."""
        raise TypeError("a pool's rows move only through KVPool.add, fork and remove, not reorder")

    def columns(self, n: int) -> slice:
        """The columns that hold a row's first ``n`` positions."""
        return slice(0, n)

    def load(self, row: int, source: KVCache, index: int, length: int) -> None:
        """Row ``index`` of a prefill's ``source`` (its first ``length`` positions) into ``row``."""
        self.keys[row, :, :length] = source.keys[index, :, :length]
        self.values[row, :, :length] = source.values[index, :, :length]


class RingKVCache(RowKVCache):
    """A sliding layer's keys and values in a ``KVPool``: a ring of ``window`` columns a row, position p at column
    p mod ``window`` (the module docstring)."""

    def __init__(self, pool: KVPool, keys: Tensor, values: Tensor, window: int) -> None:
        super().__init__(pool, keys, values)
        self.window = window

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write row i's new key over the one ``window`` positions back; return every row's ring."""
        n = k.size(0)
        rows = torch.arange(n, device=k.device)
        at = self.pool.at % self.window  # (n,)
        self.keys[rows, :, at] = k[:, :, 0]
        self.values[rows, :, at] = v[:, :, 0]
        return self.keys[:n], self.values[:n]

    def visible(self, mask: Tensor | None, queries: int, keys: int, window: int) -> Tensor:
        """Each row sees its whole ring, or while shorter than the window its own first ``length + 1`` columns:
        ``(n, 1, 1, window)`` (``mask``, over a full layer's columns, does not apply)."""
        return (torch.arange(self.window, device=self.keys.device)[None, :] <= self.pool.at[:, None])[:, None, None]

    def columns(self, n: int) -> slice:
        return slice(0, min(n, self.window))

    def load(self, row: int, source: KVCache, index: int, length: int) -> None:
        positions = torch.arange(max(0, length - self.window), length, device=self.keys.device)  # the last W
        self.keys[row][:, positions % self.window] = source.keys[index][:, positions]
        self.values[row][:, positions % self.window] = source.values[index][:, positions]


class KVPool:
    """Per-answer KV cache rows for a model's decoder (see the module docstring).

    ``add(prefilled, index, length)`` copies row ``index`` of a prefill's cache into the next free row and returns
    the row; ``fork(row)`` copies a live row into the next free one; ``remove(row)`` frees a row, moving the last one
    into it; ``step_inputs()`` gives the positions and key mask of a step over all live rows; ``advance()`` counts
    that step's token in every row.
    """

    def __init__(self, template: DecoderCache, capacity: int, max_len: int, *, width: int | None = None,
                 kept: int = 0) -> None:
        """``template``: an empty ``model.new_cache(1, 1)`` (its layers give the shapes, dtype and device).
        ``width``: every row's columns, reserved now and never grown (a server's memory, decided at start); None:
        grown by doubling as the longest row needs, up to ``max_len`` (an offline caller's). ``kept``: rows beyond
        ``capacity`` that keep recent answers' keys and values for prefix reuse (``keep``, ``restore``)."""
        first = template.self_attn[0]
        if not self.holds(template):
            raise TypeError("a pool holds keys and values (softmax attention); this model's cache is "
                            f"{type(first).__name__}")
        assert isinstance(first, KVCache)
        self.capacity, self.max_len, self.fixed, self.kept = capacity, max_len, width, kept
        self.kv_heads, self.head_dim = first.keys.size(1), first.keys.size(3)
        self.dtype, self.device = first.keys.dtype, first.keys.device
        self.lengths: list[int] = []  # each live row's filled positions
        self.at = torch.zeros(0, dtype=torch.long)  # (n,) where this step writes, set by step_inputs
        self.step_width = 0
        self.layers = [RingKVCache(self, *self._empty(c.window), c.window) if isinstance(c, WindowKVCache)
                       else RowKVCache(self, *self._empty(width or 0)) for c in template.self_attn]
        self.full = [layer for layer in self.layers if not isinstance(layer, RingKVCache)]  # the layers that grow

    @staticmethod
    def holds(template: DecoderCache) -> bool:
        """Whether a model's cache (``template``) is keys and values, which rows of a pool can hold (a linear
        attention's recurrent state is not)."""
        return bool(template.self_attn) and all(type(c) in (KVCache, WindowKVCache) for c in template.self_attn)

    @staticmethod
    def reuses_prefixes(template: DecoderCache) -> bool:
        """Whether kept rows can give a new prompt its beginning: not where a layer keeps only a window (module
        docstring)."""
        return not any(isinstance(c, WindowKVCache) for c in template.self_attn)

    def _empty(self, width: int) -> tuple[Tensor, Tensor]:
        shape = (self.capacity + self.kept, self.kv_heads, width, self.head_dim)
        return (torch.zeros(shape, dtype=self.dtype, device=self.device),
                torch.zeros(shape, dtype=self.dtype, device=self.device))

    @property
    def width(self) -> int:
        return self.full[0].keys.size(2) if self.full else self.max_len

    @property
    def rows(self) -> int:
        return len(self.lengths)

    @property
    def nbytes(self) -> int:
        """What the pool holds now (all of it, from the start, for a fixed width)."""
        return sum(t.numel() * t.element_size() for layer in self.layers for t in (layer.keys, layer.values))

    @staticmethod
    def bytes_per_position(template: DecoderCache) -> int:
        """The bytes one more position of one row costs: keys and values of every layer that grows (not a sliding
        layer's ring: ``bytes_per_row``)."""
        return sum(_position_bytes(c) for c in template.self_attn if not isinstance(c, WindowKVCache))

    @staticmethod
    def bytes_per_row(template: DecoderCache) -> int:
        """The bytes one row costs whatever its length: the ring of W positions of each sliding layer."""
        return sum(c.window * _position_bytes(c) for c in template.self_attn if isinstance(c, WindowKVCache))

    def _fit(self, need: int) -> None:
        """Grow every layer to at least ``need`` columns (doubling, at most ``max_len``); rows keep their values. A
        pool of a fixed width never grows: a row that needs more is refused."""
        if need <= self.width:
            return
        if self.fixed is not None:
            raise ValueError(f"{need} positions needed, and this pool's rows hold {self.fixed}")
        if need > self.max_len:
            raise ValueError(f"{need} positions needed, the model reads at most {self.max_len}")
        old, width = self.width, min(self.max_len, max(16, 1 << (need - 1).bit_length()))
        for layer in self.full:
            keys, values = self._empty(width)
            keys[:, :, :old], values[:, :, :old] = layer.keys, layer.values
            layer.keys, layer.values = keys, values

    @property
    def free(self) -> int:
        return self.capacity - self.rows

    def add(self, prefilled: DecoderCache, index: int, length: int) -> int:
        """Copy the first ``length`` positions of row ``index`` of a ``prefilled`` cache into a new row; return it."""
        if self.rows == self.capacity:
            raise RuntimeError(f"all {self.capacity} rows are taken")
        self._fit(length + 1)
        row = self.rows
        for layer, source in zip(self.layers, prefilled.self_attn):
            assert isinstance(source, KVCache) and not isinstance(source, WindowKVCache)  # every position kept
            layer.load(row, source, index, length)
        self.lengths.append(length)
        return row

    def fork(self, row: int) -> int:
        """A new row holding what ``row`` holds (another answer to the same prompt); return it."""
        if self.rows == self.capacity:
            raise RuntimeError(f"all {self.capacity} rows are taken")
        new, n = self.rows, self.lengths[row]
        for layer in self.layers:
            cols = layer.columns(n)
            layer.keys[new, :, cols] = layer.keys[row, :, cols]
            layer.values[new, :, cols] = layer.values[row, :, cols]
        self.lengths.append(n)
        return new

    def remove(self, row: int) -> int | None:
        """Free ``row``: the last row moves into it. Returns the row that moved (now at ``row``), or None."""
        last = self.rows - 1
        if row != last:
            n = self.lengths[last]
            for layer in self.layers:
                cols = layer.columns(n)
                layer.keys[row, :, cols] = layer.keys[last, :, cols]
                layer.values[row, :, cols] = layer.values[last, :, cols]
            self.lengths[row] = n
        self.lengths.pop()
        return last if row != last else None

    def keep(self, row: int, slot: int, length: int) -> None:
        """Copy the first ``length`` positions of live ``row`` into kept slot ``slot`` (a recent answer, for reuse)."""
        for layer in self.layers:
            layer.keys[self.capacity + slot, :, :length] = layer.keys[row, :, :length]
            layer.values[self.capacity + slot, :, :length] = layer.values[row, :, :length]

    def resume(self, slot: int, length: int, total: int) -> tuple[int, DecoderCache]:
        """A new row holding the first ``length`` positions of kept slot ``slot``, and a one-row cache whose storage
        is that row (its length ``length``, room for ``total``): a prompt of ``total`` tokens that begins with a kept
        prefix reads only the rest, straight into its row. Its length is the caller's to set once read."""
        if self.rows == self.capacity:
            raise RuntimeError(f"all {self.capacity} rows are taken")
        self._fit(total + 1)
        row, kept = self.rows, self.capacity + slot
        caches = []
        for layer in self.layers:  # full layers only: a model with sliding ones keeps no rows (reuses_prefixes)
            layer.keys[row, :, :length] = layer.keys[kept, :, :length]
            layer.values[row, :, :length] = layer.values[kept, :, :length]
            caches.append(KVCache.over(layer.keys[row:row + 1], layer.values[row:row + 1], length))
        self.lengths.append(length)
        return row, DecoderCache(caches, [None] * len(caches))  # type: ignore[arg-type]

    def step_inputs(self) -> tuple[Tensor, Tensor | None]:
        """For a step over every live row: ``positions (n, 1)`` (each row's length) and ``key_mask (n, W')``, True
        for the keys row i may see (its own past and this step's token), or None when every row is as long (then
        the model takes its unmasked path, the one ``generate`` takes)."""
        self._fit(max(self.lengths) + 1)
        self.at = torch.tensor(self.lengths, dtype=torch.long, device=self.device)  # (n,)
        self.step_width = max(self.lengths) + 1
        if min(self.lengths) == max(self.lengths):
            return self.at[:, None], None
        mask = torch.arange(self.step_width, device=self.device)[None, :] <= self.at[:, None]  # (n, W')
        return self.at[:, None], mask

    def advance(self) -> None:
        """Every live row has one more position filled (after a step)."""
        self.lengths = [n + 1 for n in self.lengths]

    def decoder_cache(self) -> DecoderCache:
        """The layers as the ``DecoderCache`` a model's forward takes."""
        return DecoderCache(self.layers, [None] * len(self.layers))  # type: ignore[arg-type]
