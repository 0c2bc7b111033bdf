"""Tasks: how each task reads its data, makes its batches and is evaluated; one module per kind of data.

What a task *is* (its model families, defaults, metrics, data form, named datasets) is declared in the task
registry (``registry/``), which names the runner here that does the work (``build.RUNNERS``):

- ``seq2seq``: copy / reverse / sort (``Seq2SeqTask``: fresh strings at every step) and translation
  (``TranslationTask``).
- ``lm``: language modelling on a text (random windows of ``max_len`` tokens, as nanoGPT).
- ``classify``: labelled text.
- ``mlm``: masked-token prediction (BERT's pretraining objective), to pretrain an encoder that a
  classifier is then fine-tuned from (``init_from=RUN_DIR``).
- ``image``: labelled images, for a Vision Transformer (no tokenizer: the model reads pixels).
- ``instruct``: instruction records, the loss on the answers alone; ``dpo``: preference records, a model that answers
  tuned by Direct Preference Optimization against its frozen start.
- ``metrics``: the scores tasks report (BLEU, chrF, accuracy, macro-F1, perplexity, exact match, GSM8K's answer).
- ``inference``: a trained checkpoint used for its task: generate, translate, classify, evaluate.

A task is built from (settings, model, data): it receives its data ready from the data pipeline
(``data.load_data``, ``make_task``); ``build_task`` does both steps for a caller that has settings and files.
The names below load on first use (``lazy.py``), so importing one task's module does not import the others.
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["Batch", "Task", "split_rows", "step_generator"], "scratchformer.tasks.base"),
    **dict.fromkeys(["RUNNERS", "build_task", "make_task"], "scratchformer.tasks.build"),
    **dict.fromkeys(["ClassifyTask", "class_probabilities", "drop_tokens"], "scratchformer.tasks.classify"),
    **dict.fromkeys(["DPOTask", "answer_logps", "dpo_loss"], "scratchformer.tasks.dpo"),
    **dict.fromkeys(["ImageTask"], "scratchformer.tasks.image"),
    **dict.fromkeys(["LMTask"], "scratchformer.tasks.lm"),
    **dict.fromkeys(["MaskedLMTask", "TokenPredictor", "mask_tokens"], "scratchformer.tasks.mlm"),
    **dict.fromkeys(["Seq2SeqTask", "TranslationTask"], "scratchformer.tasks.seq2seq"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
