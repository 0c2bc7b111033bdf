"""Where the onnxruntime loop's time goes (``export_runtimes.py --profile``): the share of a decoding call spent
inside ``InferenceSession.run`` against the Python and numpy around it, and, inside the runs, onnxruntime's own
profile summed by operator type (its ``enable_profiling`` trace). Batch 1, the benchmark's prompt and length."""

from __future__ import annotations

import collections
import json
import sys
import time
from pathlib import Path
from typing import Any


def _ort_ops(folder: Path, threads: int, ids, n: int) -> list[tuple[str, float]]:
    import onnxruntime as ort

    sys.path.insert(0, str(folder))
    import onnx_decode as od

    model = od.CachedModel(folder, threads=threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / "ort_profile")
    model.sessions["decoder"] = ort.InferenceSession(str(folder / "decoder.onnx"), options,
                                                     providers=["CPUExecutionProvider"])
    od.generate(model, ids, n)
    trace = json.loads(Path(model.sessions["decoder"].end_profiling()).read_text())
    per_op: dict[str, float] = collections.defaultdict(float)
    for event in trace:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            per_op[event["args"]["op_name"]] += event["dur"] / 1e3  # ms
    return sorted(per_op.items(), key=lambda kv: -kv[1])


def profile_report(root: Path, runs: dict[str, tuple[Any, int]], threads: int) -> str:
    """The report for each model of ``runs``: its name -> (the prompt's ids, the tokens to decode), the benchmark's
    (``export_runtimes.py`` passes them, so that this module imports nothing of it)."""
    lines = []
    for name, (ids, n) in runs.items():
        folder = root / name / "onnx"
        sys.path.insert(0, str(folder))
        import onnx_decode as od

        model = od.CachedModel(folder, threads=threads)
        od.generate(model, ids, 4)
        inside = [0.0]
        run = model.sessions["decoder"].run

        def timed(*a, run=run, inside=inside, **k):
            t = time.perf_counter()
            out = run(*a, **k)
            inside[0] += time.perf_counter() - t
            return out

        model.sessions["decoder"].run = timed
        t0 = time.perf_counter()
        od.generate(model, ids, n)
        total = time.perf_counter() - t0
        lines.append(f"\n--- onnxruntime loop, {name}, batch 1, {n} tokens: {total * 1e3:.1f} ms, "
                     f"{100 * inside[0] / total:.0f} % inside InferenceSession.run, "
                     f"{(total - inside[0]) / n * 1e3:.2f} ms a step in Python and numpy ---")
        ops = _ort_ops(folder, threads, ids, n)
        whole = sum(ms for _, ms in ops)
        lines += [f"{op:>24s} {ms:9.1f} ms {100 * ms / whole:5.1f} %" for op, ms in ops[:10]]
    return "\n".join(lines)
