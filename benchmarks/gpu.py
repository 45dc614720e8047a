"""One-file GPU benchmark, under 8 minutes on one GPU: training updates of base and big at the
paper's batch size (~25,000 target tokens per update) through the real trainer (fused attention,
fused Adam, prefetching into pinned memory; --compile adds torch.compile side by side), then beam-4
decoding throughput, at the arithmetic the trainer's `auto` takes there (bf16 where the GPU has it,
else fp16) or --precision's. Prints tokens/s, TFLOP/s and MFU against the GPU's dense peak at that
arithmetic (aiayn.runtime.hardware); writes JSON, which `python -m aiayn plan` reads (--benchmark).

    python benchmarks/gpu.py --json benchmarks/gpu.json            # on the GPU machine
    python benchmarks/gpu.py --precision fp32 --json benchmarks/gpu.json  # the paper's arithmetic
    python benchmarks/gpu.py --compile --json benchmarks/gpu.json  # also the torch.compile'd step
    python benchmarks/gpu.py --smoke                               # CPU, tiny sizes, seconds (tests run this)

Sentence lengths are drawn from a log-normal fitted to the WMT news slice in ../shared/data
(source/target log-length mean 3.22/3.17, sd 0.60, correlation 0.95 at ~1.3 pieces per word),
so batches have the real mix of shapes without needing the data on the GPU machine. Weights are
random: speed does not depend on them (decoding is capped at the source length + 1 tokens, as a
random model rarely ends a sentence by itself).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from aiayn.data import binary  # noqa: E402
from aiayn.evaluation.translate import translate  # noqa: E402
from aiayn.runtime.hardware import peak_flops  # noqa: E402
from aiayn.runtime.precision import DTYPES, resolve  # noqa: E402
from aiayn.training.distributed import Env  # noqa: E402
from aiayn.training.train import RunFiles, Trainer  # noqa: E402

VOCAB = 37000  # §5.1, EN-DE shared BPE
PRESETS = {  # Table 3
    "base": dict(N=6, d_model=512, d_ff=2048, h=8, d_k=64, d_v=64, P_drop=0.1),
    "big": dict(N=6, d_model=1024, d_ff=4096, h=16, d_k=64, d_v=64, P_drop=0.3),
    "smoke": dict(N=2, d_model=64, d_ff=128, h=4, d_k=16, d_v=16, P_drop=0.1),
}


def wmt_like_lengths(n: int, seed: int = 0, cap: int = 250) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal([3.22, 3.17], [[0.60**2, 0.95 * 0.60**2], [0.95 * 0.60**2, 0.60**2]], size=n)
    lengths = np.clip(np.rint(np.exp(z)), 1, cap).astype(np.int64)
    return lengths[:, 0], lengths[:, 1]


def synthetic_corpus(path: Path, pairs: int, vocab: int) -> binary.Corpus:
    src_len, tgt_len = wmt_like_lengths(pairs)
    rng = np.random.default_rng(1)
    sides = []
    for lengths in (src_len, tgt_len):
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        sides.append((rng.integers(4, vocab, int(offsets[-1])).astype(binary.token_dtype(vocab)), offsets))
    binary.write(path, *sides, dtype=binary.token_dtype(vocab), meta={"src_vocab": vocab, "tgt_vocab": vocab})
    return binary.read(path)


def settings(preset: str, *, tokens: int, precision: str, compile_: bool) -> dict:
    return {
        "name": f"bench-{preset}",
        "preset": preset,
        "dataset": "synthetic",
        "task": "translation",
        "model": {
            **PRESETS[preset],
            "P_drop_attn": 0.0,
            "positional": "sinusoidal",
            "max_positions": 1024,
            "pre_norm": False,
        },
        "train": {
            "steps": 10**9,
            "warmup_steps": 4000,
            "lr_scale": 1.0,
            "adam_beta1": 0.9,
            "adam_beta2": 0.98,
            "adam_eps": 1e-9,
            "eps_ls": 0.1,
            "tokens_per_update": tokens,
            "max_tokens": tokens,
            "checkpoint_interval": 10**9,
            "keep_checkpoints": 1,
            "clip_norm": 0.0,
            "precision": precision,
            "seed": 1,
            "log_interval": 10**9,
            "compile": compile_,
            "prefetch": 2,
        },
        "vocab": {"shared": True},
    }


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_training(
    corpus, preset: str, *, device, precision: str, tokens: int, warmup: int, steps: int, compile_: bool, work: Path
) -> dict:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    files = RunFiles(work / "ckpt", work / "ckpt" / "last.pt", work / "metrics.jsonl")
    trainer = Trainer(
        settings(preset, tokens=tokens, precision=precision, compile_=compile_),
        corpus,
        None,
        files,
        env=Env(device=device),
        log=lambda m: None,
    )
    trainer.model.train()
    start = time.perf_counter()
    for _ in range(warmup):  # compiling (if on), cuDNN/cuBLAS autotuning, the allocator's first blocks
        trainer.update()
    sync(device)
    warm_s = time.perf_counter() - start
    tgt = src = flops = 0
    start = time.perf_counter()
    for _ in range(steps):
        loss, s, t, f, _ = trainer.update()
        src, tgt, flops = src + s, tgt + t, flops + f
    sync(device)
    seconds = time.perf_counter() - start
    assert math.isfinite(float(loss)), "the loss is not finite"
    trainer.prefetcher.close()
    tflops = flops / seconds / 1e12  # counted from the batches (aiayn.runtime.hardware.training_flops)
    peak = peak_flops(torch.cuda.get_device_name(device), precision) if device.type == "cuda" else None
    result = {
        "preset": preset,
        "compile": compile_,
        "precision": precision,
        "params": trainer.params,
        "updates": steps,
        "tgt_tokens_per_update": tgt / steps,
        "src_tokens_per_update": src / steps,
        "s_per_update": seconds / steps,
        "tgt_tokens_per_s": tgt / seconds,
        "tflops": tflops,
        "mfu": tflops * 1e12 / peak if peak else None,
        "warmup_s": warm_s,
        "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
    }
    del trainer
    return result


def bench_decoding(preset: str, *, device, precision: str, sentences: int, batch_tokens: int) -> dict:
    from aiayn.model.hparams import ModelConfig
    from aiayn.model.transformer import build

    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab=VOCAB if preset != "smoke" else 500,
        tgt_vocab=VOCAB if preset != "smoke" else 500,
        **{**PRESETS[preset], "P_drop": 0.0},
    )
    model = build(cfg, device).eval()
    src_len, _ = wmt_like_lengths(sentences, seed=2, cap=120)
    rng = np.random.default_rng(3)
    sources = [rng.integers(4, cfg.src_vocab, int(n)).tolist() for n in src_len]
    translate(
        model,
        sources[:8],
        beam=4,
        alpha=0.6,
        max_len_a=1.0,
        max_len_b=0,
        batch_tokens=batch_tokens,
        precision=precision,
    )  # warm-up
    sync(device)
    start = time.perf_counter()
    hyps = translate(
        model, sources, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=0, batch_tokens=batch_tokens, precision=precision
    )
    sync(device)
    seconds = time.perf_counter() - start
    out_tokens = sum(len(h[0].tokens) + 1 for h in hyps)
    return {
        "preset": preset,
        "precision": precision,
        "sentences": sentences,
        "beam": 4,
        "seconds": seconds,
        "sentences_per_s": sentences / seconds,
        "output_tokens_per_s": out_tokens / seconds,
        "batch_tokens": batch_tokens,
    }


def main() -> None:
    from aiayn.commands import at_least
    from aiayn.io import writable

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["base", "big"], choices=["base", "big"])
    parser.add_argument("--tokens", type=at_least(1), default=25000, help="target tokens per update (§5.1: ~25,000)")
    parser.add_argument("--warmup", type=at_least(1), default=5)
    parser.add_argument("--steps", type=at_least(1), default=20)
    parser.add_argument("--compile", action="store_true", help="also time the torch.compile'd trainer")
    parser.add_argument("--sentences", type=at_least(1), default=3003, help="decoded sentences (newstest2014 has 3003)")
    parser.add_argument("--budget", type=float, default=420, help="seconds after which optional parts are skipped")
    parser.add_argument(
        "--precision", default="auto", choices=["auto", *DTYPES], help="the arithmetic (default: the trainer's auto)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU: checks the script itself")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.json:
        writable(args.json)  # before the benchmark, not after it
    began = time.perf_counter()
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    if device.type != "cuda" and not args.smoke:
        sys.exit("benchmarks/gpu.py: no GPU here (torch.cuda.is_available() is False); --smoke runs it on the CPU")
    presets = ["smoke"] if args.smoke else args.presets
    precision = resolve(args.precision, device)
    tokens = 600 if args.smoke else args.tokens
    warmup, steps = (1, 2) if args.smoke else (args.warmup, args.steps)
    sentences = 16 if args.smoke else args.sentences
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    print(
        f"{time.strftime('%Y-%m-%d')}  {name}  torch {torch.__version__}  {precision}  "
        f"peak {peak_flops(name, precision) or 0:.3g} FLOP/s",
        flush=True,
    )
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "device": name,
        "torch": torch.__version__,
        "training": [],
        "decoding": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        pairs = int((warmup + steps + 2) * tokens / 28 * 1.2) + 100
        corpus = synthetic_corpus(Path(tmp) / "train.bin", pairs, VOCAB if not args.smoke else 500)
        print(
            f"\ntraining: {pairs:,} synthetic pairs, ~{tokens:,} target tokens per update, {warmup} warm-up + "
            f"{steps} timed updates",
            flush=True,
        )
        print(
            f"{'model':>6} {'compile':>7} {'params':>8} {'s/update':>9} {'tgt tok/s':>10} {'TFLOP/s':>8} "
            f"{'MFU':>6} {'mem GiB':>8} {'warm-up s':>9}"
        )
        variants = [(p, False) for p in presets] + ([(p, True) for p in presets] if args.compile else [])
        for preset, compiled in variants:
            if compiled and time.perf_counter() - began > args.budget / 2:
                print(f"{preset:>6} {'yes':>7}  skipped: past half the time budget")
                continue
            try:
                r = bench_training(
                    corpus,
                    preset,
                    device=device,
                    precision=precision,
                    tokens=tokens,
                    warmup=warmup,
                    steps=steps,
                    compile_=compiled,
                    work=Path(tmp) / f"{preset}-{compiled}",
                )
            except torch.OutOfMemoryError:
                print(f"{preset:>6} {'yes' if compiled else 'no':>7}  out of memory at {tokens} tokens per update")
                continue
            report["training"].append(r)
            mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "-"
            mem = f"{r['peak_memory_gib']:.1f}" if r["peak_memory_gib"] is not None else "-"
            print(
                f"{preset:>6} {'yes' if compiled else 'no':>7} {r['params'] / 1e6:7.1f}M {r['s_per_update']:9.3f} "
                f"{r['tgt_tokens_per_s']:10,.0f} {r['tflops']:8.1f} {mfu:>6} {mem:>8} {r['warmup_s']:9.1f}",
                flush=True,
            )
        print(f"\ndecoding: beam 4, {sentences} sentences, {precision}")
        for preset in presets:
            if time.perf_counter() - began > args.budget:
                print(f"{preset:>6}  skipped: past the time budget")
                continue
            r = bench_decoding(
                preset,
                device=device,
                precision=precision,
                sentences=sentences,
                batch_tokens=600 if args.smoke else 16384,
            )
            report["decoding"].append(r)
            print(
                f"{preset:>6}  {r['sentences_per_s']:8.1f} sentences/s  {r['output_tokens_per_s']:10,.0f} output "
                f"tokens/s  ({r['seconds']:.1f} s)",
                flush=True,
            )
    report["total_s"] = time.perf_counter() - began
    print(f"\ntotal {report['total_s']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(main, "gpu")
