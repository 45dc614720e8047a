"""Training-step time of our Transformer vs torch.nn.Transformer of identical size, side by side.

Forward + backward + Adam step on the same batch (sentence lengths drawn from the real WMT news
slice when ../shared/data is there, else a fixed synthetic distribution), post-norm, ReLU, tied
embedding/projection on both sides, dropout 0.1; median of --steps timed steps after --warmup.

    python benchmarks/train_step.py --sizes demo base --tokens 4000 --json benchmarks/train_step.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from aiayn.model.hparams import ModelConfig  # noqa: E402
from aiayn.model.transformer import Transformer  # noqa: E402

SIZES = {
    "demo": dict(N=2, d_model=96, d_ff=384, h=4, d_k=24, d_v=24),
    "base": dict(N=6, d_model=512, d_ff=2048, h=8, d_k=64, d_v=64),
    "big": dict(N=6, d_model=1024, d_ff=4096, h=16, d_k=64, d_v=64),
}
VOCAB = 37000


class TorchTransformer(nn.Module):
    """nn.Transformer with the same embedding (x sqrt(d_model) + sinusoids) and tied projection work."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.tgt_vocab, cfg.d_model)
        self.core = nn.Transformer(cfg.d_model, cfg.h, cfg.N, cfg.N, cfg.d_ff, dropout=cfg.P_drop, batch_first=True)
        self.core.encoder.norm = None  # the post-norm paper model has no final LayerNorm
        self.core.decoder.norm = None
        self.scale = math.sqrt(cfg.d_model)

    def positions(self, T, d, device):
        from aiayn.model.transformer import sinusoidal_positions

        return sinusoidal_positions(T, d).to(device)

    def forward(self, src, tgt):
        d = self.embed.embedding_dim
        s = self.embed(src) * self.scale + self.positions(src.size(1), d, src.device)
        t = self.embed(tgt) * self.scale + self.positions(tgt.size(1), d, tgt.device)
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device)
        out = self.core(
            s, t, tgt_mask=mask, tgt_is_causal=True, src_key_padding_mask=src == 0, memory_key_padding_mask=src == 0
        )
        return out @ self.embed.weight.T


def real_lengths(n: int) -> list[tuple[int, int]]:
    folder = ROOT.parent / "shared" / "data" / "wmt_news_2008_2012" / "en-de"
    if folder.is_dir():
        en = gzip.open(folder / "newstest2012.en.gz", "rt", encoding="utf-8").read().split("\n")
        de = gzip.open(folder / "newstest2012.de.gz", "rt", encoding="utf-8").read().split("\n")
        pairs = [(round(1.3 * len(a.split())) + 1, round(1.3 * len(b.split())) + 1) for a, b in zip(en, de) if a and b]
    else:
        g = torch.Generator().manual_seed(0)
        pairs = [(int(x) + 1, int(x * 1.1) + 1) for x in torch.randint(5, 60, (n,), generator=g)]
    return pairs


def make_batch(tokens: int):
    """A length-sorted batch of about `tokens` source tokens, like the trainer's."""
    pairs = sorted(real_lengths(3000))
    mid = len(pairs) // 2
    s_len, t_len = pairs[mid]
    B = max(1, tokens // max(s_len, t_len))
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (B, s_len), generator=g)
    tgt = torch.randint(4, VOCAB, (B, t_len), generator=g)
    return src, tgt


def time_steps(model, src, tgt, steps: int, warmup: int) -> float:
    # the trainer's optimizer (fused Adam: one kernel over all parameters) for both models
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        logits = model(src, tgt)
        loss = loss_fn(logits.flatten(0, 1), tgt.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    from aiayn.commands import at_least

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["demo", "base"], choices=list(SIZES))
    parser.add_argument("--tokens", type=at_least(1), default=4000, help="source tokens per batch")
    parser.add_argument("--steps", type=at_least(1), default=5)
    parser.add_argument("--warmup", type=at_least(0), default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.manual_seed(0)
    src, tgt = make_batch(args.tokens)
    print(
        f"batch: {src.shape[0]} sentences, {src.numel()} source + {tgt.numel()} target tokens; "
        f"{torch.get_num_threads()} threads; torch {torch.__version__}"
    )
    results = []
    for size in args.sizes:
        cfg = ModelConfig(src_vocab=VOCAB, tgt_vocab=VOCAB, P_drop=0.1, **SIZES[size])
        ours, theirs = Transformer(cfg).train(), TorchTransformer(cfg).train()
        # alternate the two to share the machine's noise fairly
        t_ours, t_theirs = [], []
        for _ in range(2):
            t_ours.append(time_steps(ours, src, tgt, args.steps, args.warmup))
            t_theirs.append(time_steps(theirs, src, tgt, args.steps, args.warmup))
        a, b = min(t_ours), min(t_theirs)
        results.append(
            {
                "size": size,
                "ours_s": a,
                "torch_nn_transformer_s": b,
                "ratio": a / b,
                "tokens_per_s_ours": tgt.numel() / a,
            }
        )
        print(
            f"{size:>5}: ours {a * 1000:8.1f} ms, nn.Transformer {b * 1000:8.1f} ms, ratio {a / b:.2f} "
            f"(target <= 0.9 at base)",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(main, "train_step")
