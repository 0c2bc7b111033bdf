"""Pictures of a model and its training, as PNG (or SVG) files (the ``plots`` extra: matplotlib).

- ``attention``: attention maps as heatmaps, per layer and head (§3.2); a trained checkpoint's for a text;
- ``image_attention``: a Vision Transformer's class-token attention over an image, and its rollout;
- ``training``: the sinusoidal positional encoding (§3.5), the learning-rate schedule (§5.3), the curves of
  a training run.

Every function writes one PNG (an SVG for a ``.svg`` file name) and returns its path. Figures are built with
``matplotlib.figure.Figure`` and rendered by the Agg (PNG) or SVG renderer, never through ``pyplot``: no display
is needed, the caller's pyplot backend is left as it is (a notebook keeps its inline one), and no figure outlives
its call.
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    "ATTENTION_KINDS": "scratchformer.nn.recording",
    **dict.fromkeys(["MAX_FIGURE_INCHES", "plot_attention", "plot_checkpoint_attention"],
                    "scratchformer.app.plots.attention"),
    **dict.fromkeys(["attention_rollout", "class_token_attention", "plot_checkpoint_image_attention",
                     "plot_image_attention", "vit_attention"], "scratchformer.app.plots.image_attention"),
    **dict.fromkeys(["plot_curves", "plot_lr_schedule", "plot_positional_encoding"],
                    "scratchformer.app.plots.training"),
    **dict.fromkeys(["DPI"], "scratchformer.app.plots.common"),
    **dict.fromkeys(["attention_maps"], "scratchformer.nn.recording"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
