"""The commands that use a trained model or look at one, declared as data (``arguments.Command``); ``cli.py``
builds the parser from them with ``train`` and ``prepare``. Each names the function that runs it as
``"module:function"``, imported only when it runs, so that the parser (``--help``) starts without PyTorch."""

from __future__ import annotations

from scratchformer.app.arguments import Command, Option, at_least, in_range, opt, positive_float
from scratchformer.registry import data_formats

_RUN = "scratchformer.app.commands:"
_CKPT = opt("--ckpt", required=True, help="checkpoint or run directory (generate, evaluate, explore, serve: also a "
            "Hugging Face folder of a Llama, Qwen3 or GPT-2 model)")
_DECODING = [
    opt("--beam", type=at_least(1), default=4, help="beam size (>= 1; 1 = greedy); the paper uses 4"),
    opt("--length-penalty", type=at_least(0.0, float), default=0.6,
        help="alpha of the length penalty (>= 0; the paper: 0.6)"),
]


_BENCHMARK = [
    opt("--benchmark", metavar="NAMES", help="instead of --split/--data: score a language model on benchmarks, "
        "comma-separated, each as lm-evaluation-harness 0.4.13 scores it: arc_easy, arc_challenge, hellaswag, mmlu, "
        "gsm8k "
        "(read from benchmarks/ in $SCRATCHFORMER_DATA or --data-dir), or the path of a .jsonl/.jsonl.gz file of "
        'multiple-choice questions, a line each: {"context": ..., "choices": [...], "answer": index}'),
    opt("--limit", type=at_least(1), help="with --benchmark: only the first N questions of each (of each subject "
        "for mmlu, as the harness's --limit)"),
    opt("--shots", type=at_least(0), help="with --benchmark: examples answered before each question (default: the "
        "harness task's own, 5 for gsm8k, else 0; mmlu: 0 to 5, the first of its dev split; gsm8k: drawn from its "
        "train split as the harness draws them)"),
    opt("--chat", choices=["auto", "yes", "no"], default="auto", help="with --benchmark gsm8k: ask each problem as "
        "a conversation in the model's own template, the harness's --apply_chat_template --fewshot_as_multiturn "
        "(auto, the default: when the model has one, an instruction-tuned run or a folder with a chat template)"),
    opt("--output", metavar="OUT.json", help="with --benchmark: the results file (default: benchmarks.json in the "
        "run directory, or in the current directory for a Hugging Face folder); results are merged into it by name"),
    opt("--data-dir", help="with --benchmark: where benchmarks/ is looked for first; then $SCRATCHFORMER_DATA, "
        "then the user cache"),
]


def _inputs(what: str) -> list[Option]:
    return [_CKPT, opt("texts", nargs="*", metavar="TEXT", help=f"inputs (else --input FILE, else standard input); "
                       f"{what}"),
            opt("--input", help="a file with one input per line ('-' = standard input)")]


INFERENCE = [
    Command("info", "describe a checkpoint", [
        opt("ckpt", help="a checkpoint directory, or a run directory (its best/ checkpoint)"),
        opt("--verify", action="store_true", help="a LoRA run: hash its base in full (every byte) against the sha256 "
            "recorded when the run was made; loading checks the base by its files' sizes, times and headers")],
        _RUN + "cmd_info"),
    Command("generate", "continue a prompt with a language model, or answer an instruction", [
        _CKPT,
        opt("--prompt", help="the text to continue (until --max-new-tokens, or the end-of-text token)"),
        opt("--instruction", help="instead of --prompt: an instruction to answer, asked in the template the model was "
            "tuned with (task=instruct; a Hugging Face folder's chat template; Alpaca's for another GPT); the answer "
            "ends at the end-of-text token"),
        opt("--instruction-input", default="", help="with --instruction: its input (Alpaca's \"input\"), if any"),
        opt("--max-new-tokens", type=at_least(1), default=200, help="tokens to add (>= 1; default 200)"),
        opt("--temperature", type=positive_float, default=0.8,
            help="divide the logits by this before sampling (> 0; default 0.8; lower is more conservative)"),
        opt("--top-k", type=at_least(1), default=None, help="sample from the k most likely tokens only (>= 1)"),
        opt("--top-p", type=in_range(0.0, 1.0), default=None,
            help="sample from the smallest set of tokens whose probability reaches p (in (0, 1])"),
        opt("--seed", type=at_least(0), default=None, help="seed of the sampling (>= 0), for a reproducible text"),
        opt("--greedy", action="store_true", help="always take the most likely token (no sampling)"),
        opt("--json-schema", metavar="FILE", help="answer with JSON that fits the schema in FILE (constrained "
            "decoding; the serve extra), bounded to end within --max-new-tokens"),
    ], _RUN + "cmd_generate"),
    Command("translate", "translate sentences with an encoder-decoder", [*_inputs("sentences"), *_DECODING],
            _RUN + "cmd_translate"),
    Command("classify", "label texts, or image files with an image classifier (ViT): label and probability per "
            "line", _inputs("for an image classifier, image files"), _RUN + "cmd_classify"),
    Command("evaluate", "metrics of a checkpoint on held-out data, as JSON; or a language model's scores on "
            "benchmarks (ARC, HellaSwag, MMLU, GSM8K, a file of yours)", [
        opt("--ckpt", required=True, nargs="+", metavar="DIR", help="checkpoint or run directory (or a Hugging Face "
            "folder); several classifiers: evaluate them as an ensemble (the mean of their class probabilities)"),
        opt("--split", help="the run's own split: test (default) or val"),
        opt("--data", nargs="+", metavar="PATH", help="score all of these files instead (a test set), in the form "
            "the model's task takes: " + data_formats()),
        *_DECODING,
        *_BENCHMARK,
    ], _RUN + "cmd_evaluate"),
    Command("report", "write RUN/report.md: what a training run was and how it scored, one page with its figures", [
        opt("--ckpt", required=True, metavar="RUN", help="a training run directory (what train --out wrote)"),
    ], "scratchformer.app.report:cmd_report",
        description="Write RUN/report.md and its figures in RUN/report/: what was trained (model, parameters, "
                    "settings and where each came from), the data (splits, sizes, each file's sha256), where and "
                    "when, the curves (loss, learning rate, throughput), the final metrics, every benchmark result in "
                    "RUN/benchmarks.json (evaluate --benchmark), a few samples and the command that makes the run "
                    "again. It writes nothing else."),
    Command("export", "export a checkpoint's model to ONNX, GGUF (llama.cpp), TorchScript or Hugging Face "
            "transformers", [
        _CKPT,
        opt("--format", choices=["onnx", "onnx-single", "gguf", "torchscript", "hf"], required=True,
            help="onnx: a folder of graphs with the KV cache, a manifest and onnx_decode.py (decodes without "
                 "PyTorch); onnx-single: one graph, every position's logits in one pass; gguf: one file for "
                 "llama.cpp (a GPT); hf: a directory that transformers' from_pretrained loads"),
        opt("--out", required=True, help="output file (a directory for --format onnx and hf)"),
        opt("--gguf-type", choices=["f32", "f16", "q8_0"], default="f32",
            help="gguf: the weight matrices' type (norms and biases stay float32)"),
        opt("--hf-class", choices=["GPT2LMHeadModel", "BertForSequenceClassification", "BertModel"],
            help="hf: the transformers class (default: GPT2LMHeadModel for a GPT, BertForSequenceClassification for "
                 "a classifier, BertModel for a task=mlm encoder)"),
        opt("--force", action="store_true", help="overwrite --out if it exists"),
    ], "scratchformer.app.export.command:cmd_export"),
    Command("serve", "serve a language model behind OpenAI's API (/v1/chat/completions, /v1/completions), with a "
            "chat page", [
        _CKPT,
        opt("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this computer only; "
            "0.0.0.0: every network, said at the start)"),
        opt("--port", type=at_least(0), default=8000, help="port to listen on (default 8000; 0: any free port)"),
        opt("--api-key", metavar="KEY", help="refuse /v1 requests without 'Authorization: Bearer KEY' (default: "
            "$SCRATCHFORMER_API_KEY if set, else no key)"),
        opt("--name", help="the model's id in /v1/models and in answers (default: the run's or folder's name)"),
        opt("--max-batch", type=at_least(1), default=16, help="answers decoded together at most (default 16; a request "
            "asks for n of them, n at most 8); more wait their turn"),
        opt("--context", type=at_least(2), help="positions a request's prompt and answer may take together: each "
            "row of the cache holds this many, reserved at start for --max-batch rows (default: the model's window, "
            "cut so that the cache takes at most a quarter of this computer's memory; said at start); a longer "
            "request is refused with a 400"),
        opt("--prefix-cache", type=at_least(0), help="recent answers kept for prefix reuse (a chat's next turn, a "
            "shared system prompt read once): rows of --context positions reserved beside the others (default: as "
            "many as --max-batch; 0: none; none for a model with sliding-window layers)"),
        opt("--max-body", type=at_least(1024), default=1 << 20, help="largest request body in bytes (default "
            "1 MiB)"),
        opt("--read-timeout", type=at_least(1, float), default=30, help="seconds a request's head, and then its "
            "body, may take to arrive; then the connection is closed (default 30)"),
        opt("--grace", type=at_least(0, float), default=5, help="at SIGTERM, seconds the answers in progress may take "
            "to finish; then a stream ends with an error event and a waiting request is a 503 (default 5)"),
        opt("--threads", type=at_least(1), help="PyTorch's threads for the model (default: PyTorch's choice, one a "
            "core; 1 is often faster for a small model on a busy machine)"),
        opt("--verbose", action="store_true", help="log every request"),
    ], "scratchformer.app.serve.run:run_command",
        description="Serve a language model (a GPT run, an instruction-tuned or LoRA run, a Llama, Qwen3 or GPT-2 "
                    "folder) over HTTP as OpenAI's API: POST /v1/chat/completions (the messages in the model's "
                    "chat template; a model without one serves completions only), POST /v1/completions, GET "
                    "/v1/models, with max_tokens, temperature (0: greedy), top_p, top_k, stop, seed and stream "
                    "(server-sent events), n (up to 8 answers, the prompt read once). Requests are decoded together by "
                    "one engine, joining and leaving between steps (continuous batching), in a cache whose memory "
                    "is reserved at start (--max-batch x --context positions, and --prefix-cache rows that keep "
                    "recent answers: a prompt that begins with one reads only the rest; usage.prompt_tokens_details."
                    "cached_tokens says how many). GET / is a chat page. SIGTERM or Ctrl-C stops it. Accepted and "
                    "ignored: user, store, metadata, service_tier, parallel_tool_calls, reasoning_effort, verbosity, "
                    "prompt_cache_key, prompt_cache_options, prompt_cache_retention, safety_identifier, prediction, "
                    "stream_options.include_obfuscation; penalties, logprobs, tools, response_format, modalities, "
                    "audio and web search only at values that change nothing. Limits: a POST must be "
                    "'Content-Type: application/json'; a request from another site's page (its Origin) is refused; "
                    "--max-body bytes; --read-timeout; at most 320 connections at once (more get a 503 in OpenAI's "
                    "form), an idle one closed after 5 s; at most 256 requests waiting.",
        epilog="example: scratchformer serve --ckpt runs/assistant, then any OpenAI client with "
               "base_url=http://127.0.0.1:8000/v1 (and any api_key unless --api-key is set)"),
]


EXPLORE = Command("explore", "the attention explorer: a local web page that draws every layer's and head's attention "
            "and each layer's prediction for what you type", [
                _CKPT,
                opt("--port", type=int, default=8000, help="port to listen on (default 8000; 0: any free port)"),
                opt("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this computer "
                    "only)"),
                opt("--max-chars", type=int, help="longest input accepted, in characters (default 1000)"),
                opt("--max-tokens", type=int, help="longest input accepted, in tokens (default 128; never more "
                    "than the model's max_len)"),
                opt("--verbose", action="store_true", help="log every request"),
                opt("--export", metavar="FILE", help="write FILE instead of serving: .html (the page with the "
                    "numbers of --text inside, one file that opens offline), .png or .svg (one view as a picture)"),
                opt("--text", action="append", help="--export: an input (repeat it for several in one .html page)"),
                opt("--kind", help="--export: which attention, by the explorer's names: encoder.self_attn | "
                    "decoder.self_attn | decoder.cross_attn (needed for an encoder-decoder's .png or .svg)"),
                opt("--layer", type=at_least(0), help="--export: the layer (a picture: default every layer)"),
                opt("--head", type=at_least(0), help="--export: the head (a picture: default every head)"),
                opt("--option", action="append", metavar="NAME=VALUE", help="--export: an option as the page "
                    "sets it (top_k, max_new_tokens, temperature, sample_top_k, seed; beam, length_penalty, "
                    "target)"),
                opt("--force", action="store_true", help="--export: replace FILE if it exists"),
            ], _RUN + "cmd_explore",
            description="Serve a web page (on this computer only, by default) where you type an input and see "
                        "its tokens, every layer's and head's attention, each layer's prediction (the logit lens: "
                        "what the model would predict if it stopped after that layer) and the model's output: "
                        "next-token probabilities and a sampled continuation (GPT), the beam-search translation "
                        "(encoder-decoder) or the class probabilities (classifier). POST /api/explore serves "
                        "the same numbers as JSON. With --export FILE it writes instead, for the --text inputs: "
                        "FILE.html, the page as one file that works offline; FILE.png or FILE.svg, one view as a "
                        "picture.",
            epilog='example: scratchformer explore --ckpt runs/copy --text "abcdefg" --export view.html; '
                   "... --export cross.svg --kind decoder.cross_attn --layer 1 --head 0")


def model_tools(model_presets: list[str]) -> list[Command]:
    """plot, explore, explain, demo: pictures and descriptions of models."""
    return [
        Command("plot", "draw attention maps, positional encodings, the LR schedule or training curves", [
            opt("what", choices=["attention", "positions", "schedule", "curves"]),
            opt("--out", required=True, help="PNG (or SVG, by the name's ending) file to write"),
            opt("--ckpt", help="attention / schedule: a checkpoint or run directory"),
            opt("--text", help="attention: the input text"),
            opt("--image", help="attention (an image classifier, ViT): an image file; the picture shows the class "
                "token's attention over its patches"),
            opt("--target", help="attention (seq2seq): the target text (default: the model's translation)"),
            opt("--kind", help="attention: encoder.self_attn | decoder.self_attn | decoder.cross_attn"),
            opt("--run", help="curves: a training run directory (with metrics.jsonl)"),
            opt("--preset", help="schedule: a training preset (default: the copy task's defaults)"),
            opt("--max-len", type=at_least(1), default=100, help="positions: number of positions"),
            opt("--d-model", type=at_least(2), default=128, help="positions: model size (even)"),
            opt("overrides", nargs="*", metavar="key=value", help="schedule: settings, e.g. warmup_steps=4000"),
        ], _RUN + "cmd_plot", settings=True),
        EXPLORE,
        Command("explain", "print a model's data flow: each stage's tensor shape and parameters; or, with --ckpt "
                "and --prompt, a trained model's prediction layer by layer", [
            opt("--preset", help="a model or training preset (default: paper-base)"),
            opt("--batch", type=at_least(1), help="example batch size B (default 1)"),
            opt("--length", type=at_least(1), help="example input length T (source length S for translation; "
                "default 8)"),
            opt("--target-length", type=at_least(1), default=None, help="translation: target length (default: "
                "--length)"),
            opt("--ckpt", help="a checkpoint or run directory: print what it would predict after the embeddings and "
                "after each layer for --prompt (the logit lens), instead of a preset's data flow"),
            opt("--prompt", help="with --ckpt: the input (a GPT's prompt, an encoder-decoder's source sentence, a "
                "classifier's text), within the explorer's limits (1000 characters, 128 tokens, max_len)"),
            opt("--image", help="with --ckpt of an image classifier (ViT): the image file whose class probabilities "
                "it prints after each layer"),
            opt("overrides", nargs="*", metavar="key=value", help="model settings to change, e.g. n_layers=2"),
        ], _RUN + "cmd_explain", settings=True,
            description=f"Build the model of a preset (model presets: {', '.join(model_presets)}; or any training "
                        "preset) with key=value changes, run one random example through it and print every stage "
                        "in order: embedding, each layer's attention scores (B, H, T, S), feed-forward expansion, "
                        "add & norm, logits; then the parameter total checked against the analytic formula. With "
                        "--ckpt RUN --prompt TEXT instead: the trained model's prediction layer by layer (the logit "
                        "lens), for every position the top tokens after the embeddings and after each layer, and "
                        "the probability each layer gives the token the model finally predicts (a classifier: its "
                        "class probabilities after each layer; an image classifier's for --image FILE), the numbers "
                        "the explorer's page shows."),
        Command("demo", "build a model, count its parameters, run a forward pass", [
            opt("--preset", default="paper-base", help=f"a model preset: {', '.join(model_presets)}"),
            opt("--seed", type=at_least(0), default=0),
            opt("overrides", nargs="*", metavar="key=value", help="ModelConfig fields to change"),
        ], _RUN + "cmd_demo", settings=True),
    ]
