"""Decoding speed on a trained model with natural EOS: ours (KV-cached batched beam search) vs
Hugging Face `generate` on the exported, identical weights vs CTranslate2, side by side.

    python benchmarks/decode_trained.py --model results/demo/base/average.pt \
        --spm results/demo/data/eng-zil/spm.src.model --input results/demo/data/eng-zil/test.src \
        --export results/demo/base/hf --ct2 results/demo/base/hf-ct2 [--repeats 3] [--json out.json]

The same sentences, beam 4, the same length limit (source length + 10), sentences in batches of
`--batch` (the same sentence batches for all three: sorted by length, as each system prefers).
Each system runs `--repeats` times, alternating, and its best time counts. Sentences/s and the
ratios are printed. Needs the `export` extra (transformers, ctranslate2).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from aiayn.data import vocab  # noqa: E402
from aiayn.data.binary import EOS, PAD  # noqa: E402
from aiayn.evaluation.translate import translate  # noqa: E402
from aiayn.runtime import checkpoint as ckpt  # noqa: E402

BEAM, EXTRA = 4, 10


def batches(ids: list[list[int]], size: int) -> list[list[int]]:
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    return [order[i : i + size] for i in range(0, len(order), size)]


def run_ours(model, ids, batch: int) -> list[list[int]]:
    tokens = batch * (max(map(len, ids)) + 1)  # our batcher counts source tokens: at most `batch` sentences
    hyps = translate(model, ids, beam=BEAM, alpha=0.6, max_len_a=1.0, max_len_b=EXTRA, batch_tokens=tokens)
    return [h[0].tokens for h in hyps]


@torch.no_grad()
def run_hf(model, ids, batch: int) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in ids]
    for group in batches(ids, batch):
        x = torch.full((len(group), max(len(ids[i]) for i in group) + 1), PAD, dtype=torch.long)
        for row, i in enumerate(group):
            x[row, : len(ids[i])] = torch.tensor(ids[i])
            x[row, len(ids[i])] = EOS
        y = model.generate(input_ids=x, attention_mask=(x != PAD).long(), num_beams=BEAM, length_penalty=0.6,
                           max_new_tokens=x.size(1) + EXTRA, early_stopping=True)  # fmt: skip
        for row, i in enumerate(group):
            toks = y[row, 1:].tolist()
            out[i] = toks[: toks.index(EOS)] if EOS in toks else [t for t in toks if t != PAD]
    return out


def run_ct2(translator, sp, ids, batch: int) -> list[list[int]]:
    pieces = [[sp.IdToPiece(i) for i in t] + ["</s>"] for t in ids]
    limit = max(map(len, ids)) + 1 + EXTRA
    res = translator.translate_batch(pieces, beam_size=BEAM, length_penalty=0.6, max_batch_size=batch,
                                     max_decoding_length=limit, min_decoding_length=0)  # fmt: skip
    return [[sp.PieceToId(p) for p in r.hypotheses[0]] for r in res]


def main(argv=None) -> int:
    from aiayn.commands import at_least

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--spm", required=True, help="the source sentencepiece model (shared vocabulary)")
    p.add_argument("--input", required=True)
    p.add_argument("--export", required=True, help="the model's Hugging Face export (aiayn export)")
    p.add_argument("--ct2", required=True, help="its CTranslate2 conversion")
    p.add_argument("--batch", type=at_least(1), default=32, help="sentences per batch")
    p.add_argument("--repeats", type=at_least(1), default=3)
    p.add_argument("--sentences", type=at_least(0), default=0, help="only the first N (0: all)")
    p.add_argument("--threads", type=at_least(1), default=torch.get_num_threads())
    p.add_argument("--json")
    args = p.parse_args(argv)
    import ctranslate2
    from transformers import MarianMTModel

    torch.set_num_threads(args.threads)
    sp = vocab.load(args.spm)
    lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    lines = lines[: args.sentences] if args.sentences else lines
    ids = vocab.to_ids(sp, lines)
    ours = ckpt.rebuild(ckpt.load(args.model)).eval()
    hf = MarianMTModel.from_pretrained(args.export).eval()
    ct2 = ctranslate2.Translator(args.ct2, device="cpu", inter_threads=1, intra_threads=args.threads)
    systems = {
        "ours": lambda: run_ours(ours, ids, args.batch),
        "hf_generate": lambda: run_hf(hf, ids, args.batch),
        "ctranslate2": lambda: run_ct2(ct2, sp, ids, args.batch),
    }
    for fn in systems.values():  # warm-up
        fn()
    best = {name: float("inf") for name in systems}
    outputs = {}
    for _ in range(args.repeats):  # alternating, best of N
        for name, fn in systems.items():
            start = time.perf_counter()
            outputs[name] = fn()
            best[name] = min(best[name], time.perf_counter() - start)
    n = len(ids)
    report = {
        "sentences": n,
        "beam": BEAM,
        "batch": args.batch,
        "threads": args.threads,
        "seconds": best,
        "sentences_per_s": {k: n / v for k, v in best.items()},
        "ours_vs_hf_generate": best["hf_generate"] / best["ours"],
        "ours_vs_ctranslate2": best["ctranslate2"] / best["ours"],
        "same_1best_as_ours": {k: sum(a == b for a, b in zip(outputs["ours"], v)) / n for k, v in outputs.items()},
        "output_tokens": {k: sum(map(len, v)) for k, v in outputs.items()},
    }
    for name in systems:
        print(f"{name:12s} {report['sentences_per_s'][name]:8.1f} sentences/s  (best of {args.repeats}: "
              f"{best[name]:.2f} s; 1-best as ours: {report['same_1best_as_ours'][name]:.0%})")  # fmt: skip
    print(f"ours / HF generate: {report['ours_vs_hf_generate']:.2f}x   ours / CTranslate2: "
          f"{report['ours_vs_ctranslate2']:.2f}x")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(lambda: sys.exit(main()), "decode_trained")
