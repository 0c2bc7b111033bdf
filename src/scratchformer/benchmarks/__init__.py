"""The field's yardsticks for a language model, scored exactly as lm-evaluation-harness 0.4.13 scores them:
ARC-Easy, ARC-Challenge, HellaSwag, MMLU and a user's own multiple-choice file (``evaluate --benchmark``).

- ``questions.py``: each benchmark's questions written as the harness's task of that name writes them;
- ``catalog.py``: the benchmarks by name, what each reads and reports;
- ``loglikelihood.py``: the log-likelihood of each choice, tokenized as the harness does, a question's prompt read
  once into the KV cache and its choices continued from it (``scores_text`` decides which models can be scored);
- ``metrics.py``: ``acc``, ``acc_norm``, their standard errors, MMLU's groups;
- ``run.py``: a checkpoint scored on a list of benchmarks; ``results.py``: the results file of a run.
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["evaluate_benchmarks", "load_questions"], "scratchformer.benchmarks.run"),
    **dict.fromkeys(["loglikelihoods", "scores_text", "encode_pairs", "Request"],
                    "scratchformer.benchmarks.loglikelihood"),
    **dict.fromkeys(["BENCHMARKS", "find_benchmark", "benchmark_names"], "scratchformer.benchmarks.catalog"),
    **dict.fromkeys(["Question"], "scratchformer.benchmarks.questions"),
    **dict.fromkeys(["merge_results", "read_results", "results_path"], "scratchformer.benchmarks.results"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
