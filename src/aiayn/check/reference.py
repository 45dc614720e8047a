"""§3's Transformer, §5.4's loss and §5.3's Adam written again from the paper alone, over the
model's weights read through `Transformer.paper_map`, computed as a `Form` says: the paper's, a
way it admits, or a known mistake; in training mode over the dropout masks the model drew."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial

import torch
import torch.nn.functional as F

# the model's own: a rounding 1e-6 of its values against tolerances of 1e-3 (float64: 3.4 GB more for big)
DTYPE = torch.float32
LN_EPS = 1e-5  # torch's and tensor2tensor's alike: far below the tolerances' effect


@dataclass(frozen=True)
class Form:
    layout: str = "interleaved"  # or "halves": both §3.5's table
    origin: int = 0  # the first position's index, in training and decoding alike
    emb_scale: bool = True  # x sqrt(d_model), §3.4
    positions: int = 1  # times the encoding is added
    pos_scaled: bool = False  # the encoding added before the x sqrt(d_model)
    attn_scale: str = "sqrt_dk"  # "dk", "none", "sqrt_d_model"
    softmax_dim: int = -1
    fill: float = -math.inf  # what masked scores are filled with
    causal: str = "mask"  # "none", "strict" (a position does not see itself)
    pad_mask: str = "real"  # the keys read: "real" ones, "all", or only the padding ("inverted")
    split: str = "transpose"  # or "strided" (head i: every h-th column, admitted); "view": no transpose, a mistake
    merge: str = "transpose"  # "view": heads merged without it
    w_o: bool = True
    act: str = "relu"  # "gelu", "none"
    ffn_bias: bool = True
    wrap: str = ""  # the sublayer connection: "" the settings' (post-LN, §3.1; pre-LN where set), or a mistake
    logit_scale: bool = False  # logits x sqrt(d_model)
    at: int | None = None  # the sublayer of a layer a mistake is at (None: every one)


def sinusoids(length: int, d_model: int, layout: str = "interleaved", origin: int = 0) -> torch.Tensor:
    """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...), float64."""
    pos = torch.arange(origin, origin + length, dtype=torch.float64)[:, None]
    angle = pos / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cat([angle.sin(), angle.cos()], 1) if layout == "halves" else \
        torch.stack([angle.sin(), angle.cos()], 2).reshape(length, d_model)  # fmt: skip


def change(got, want, keep=None, floor: float = 1.0) -> float:
    """`got`'s largest difference from `want` where `keep`, over want's largest magnitude (at least `floor`); inf
    where `got` is missing, of another shape or not finite."""
    if got is None or tuple(got.shape) != tuple(want.shape):
        return math.inf
    got, want = (t.detach().double() if keep is None else t.detach().double()[keep] for t in (got, want))
    diff, scale = (float(t.abs().max()) if t.numel() else 0.0 for t in (got - want, want))
    return diff / max(scale, floor) if math.isfinite(diff) and max(scale, floor) > 0 else (math.inf if diff else 0.0)


class Reference:
    """§3's forward pass over `params` (role -> tensor, as `paper_map` names them) with the sizes and settings of
    `cfg` (a ModelConfig), computed as `form` says, over the masks `drops` ({"residual": [...], "attention": [...]})."""

    def __init__(self, params: dict, cfg, form: Form = Form(), drops: dict | None = None, *, base: Form | None = None):
        self.p, self.cfg, self.form, self.base = params, cfg, form, base or form
        self.drops = drops or {"residual": [], "attention": []}

    def f(self, j: int) -> Form:
        """The form of sublayer j: a mistake `at` another sublayer leaves this one as the base."""
        return self.form if self.form.at in (None, j) else self.base

    def drop(self, x, kind: str, k: int):
        masks, p = self.drops[kind], self.cfg.P_drop if kind == "residual" else self.cfg.P_drop_attn
        return x * masks[k].to(x.dtype) / (1 - p) if masks else x

    def linear(self, name: str, x, bias: bool = True):
        y = x @ self.p[f"{name}.weight"].flatten(1).T  # a kernel-1 convolution's (out, in, 1) too
        return y + self.p[f"{name}.bias"] if bias and f"{name}.bias" in self.p else y

    def norm(self, name: str, x):
        """LayerNorm (Ba et al.): each position's vector normalised, then its gain and bias."""
        return F.layer_norm(x, x.shape[-1:], self.p[f"{name}.weight"], self.p[f"{name}.bias"], LN_EPS)

    def embed(self, side: str, tokens):
        """§3.4: the embedding times sqrt(d_model); §3.5: plus the positional encoding; §5.4: dropped."""
        f, d, T = self.form, self.cfg.d_model, tokens.size(1)
        pe = self.p[f"{side}_pos"][f.origin : f.origin + T] if self.cfg.positional == "learned" else \
            sinusoids(T, d, f.layout, f.origin).to(DTYPE)  # fmt: skip
        scale = math.sqrt(d) if f.emb_scale else 1.0
        e = self.p["tgt_embed" if side == "tgt" or self.cfg.shared_vocab else "src_embed"][tokens]
        x = (e + pe) * scale if f.pos_scaled else e * scale + f.positions * pe
        return self.drop(x, "residual", 0 if side == "src" else 1 + 2 * self.cfg.N)

    def keep(self, queries, keys, causal: bool, f: Form):
        """Which keys each query reads (B, T, S): not padding; in the decoder's self-attention, not after it."""
        B, T, S = queries.size(0), queries.size(1), keys.size(1)
        if causal:
            diagonal = {"mask": 0, "strict": -1, "none": S}[f.causal]
            return torch.ones(T, S, dtype=torch.bool).tril(diagonal).expand(B, T, S)
        real = {"real": keys != self.cfg.pad_id, "inverted": keys == self.cfg.pad_id}.get(f.pad_mask, keys == keys)
        return real[:, None, :].expand(B, T, S)

    def attention(self, name: str, x, memory, keep, *, f: Form, k: int):
        """§3.2: Concat(head_1..head_h) W^O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i over the kept keys."""
        cfg = self.cfg
        h, d_k, d_v, B, T, S = cfg.h, cfg.d_k, cfg.d_v, x.size(0), x.size(1), memory.size(1)

        split = lambda t, L, d: t.reshape(B, h, L, d) if f.split == "view" else t.view(B, L, d, h).permute(  # noqa: E731
            0, 3, 1, 2) if f.split == "strided" else t.view(B, L, h, d).transpose(1, 2)  # fmt: skip
        q = split(self.linear(f"{name}.W_q", x), T, d_k)  # (B, h, T, d_k)
        key = split(self.linear(f"{name}.W_k", memory), S, d_k)
        v = split(self.linear(f"{name}.W_v", memory), S, d_v)
        scale = {"sqrt_dk": d_k**-0.5, "dk": 1 / d_k, "none": 1.0, "sqrt_d_model": cfg.d_model**-0.5}[f.attn_scale]
        scores = (q @ key.transpose(-1, -2) * scale).masked_fill(~keep[:, None], f.fill)  # (B, h, T, S)
        weights = scores.softmax(f.softmax_dim).nan_to_num(0.0)  # a query with no key to read: 0, as torch's
        heads = self.drop(weights, "attention", k) @ v  # (B, h, T, d_v)
        heads = heads.reshape(B, T, h * d_v) if f.merge == "view" else heads.transpose(1, 2).reshape(B, T, h * d_v)
        return self.linear(f"{name}.W_o", heads) if f.w_o else heads

    def ffn(self, name: str, x, f: Form):
        """§3.3: max(0, x W1 + b1) W2 + b2."""
        act = {"relu": torch.relu, "gelu": F.gelu, "none": lambda t: t}[f.act]
        return self.linear(f"{name}.W_2", act(self.linear(f"{name}.W_1", x, f.ffn_bias)), f.ffn_bias)

    def sublayer(self, layer: str, j: int, x, fn, *, k: int):
        """§3.1 and §5.4: LayerNorm(x + Dropout(Sublayer(x))); x + Dropout(Sublayer(LayerNorm(x))) under pre_norm."""
        pre = self.cfg.pre_norm
        wrap = self.f(j).wrap or ("pre" if pre else "post")
        n, d = partial(self.norm, f"{layer}.norm{j}"), lambda t: self.drop(t, "residual", k)
        forms = {
            "post": lambda: n(x + d(fn(x))),
            "pre": lambda: x + d(fn(n(x))),
            "no_residual": lambda: d(fn(n(x))) if pre else n(d(fn(x))),
            "no_norm": lambda: x + d(fn(x)),
            "no_sublayer": lambda: x if pre else n(x),
            "twice": lambda: 2 * x + d(fn(n(x))) if pre else n(2 * x + d(fn(x))),
            "drop_after_norm": lambda: d(n(x + fn(x))),
            "drop_input": lambda: x + d(fn(n(d(x)))) if pre else n(x + fn(d(x))),
        }
        return forms[wrap]()

    def encoder_layer(self, i: int, x, src):
        p = f"encoder.{i}"
        keep = self.keep(x, src, False, self.f(0))
        x = self.sublayer(p, 0, x, lambda a: self.attention(f"{p}.self", a, a, keep, f=self.f(0), k=i), k=1 + 2 * i)
        return self.sublayer(p, 1, x, lambda a: self.ffn(f"{p}.ffn", a, self.f(1)), k=2 + 2 * i)

    def decoder_layer(self, i: int, y, memory, src):
        p, N = f"decoder.{i}", self.cfg.N
        k = 2 + 2 * N + 3 * i  # the layer's first residual mask
        causal = self.keep(y, y, True, self.f(0))
        y = self.sublayer(p, 0, y, lambda a: self.attention(f"{p}.self", a, a, causal, f=self.f(0), k=N + 2 * i), k=k)
        cross = self.keep(y, src, False, self.f(1))
        y = self.sublayer(p, 1, y, lambda a: self.attention(f"{p}.cross", a, memory, cross, f=self.f(1),
                                                            k=N + 2 * i + 1), k=k + 1)  # fmt: skip
        return self.sublayer(p, 2, y, lambda a: self.ffn(f"{p}.ffn", a, self.f(2)), k=k + 2)

    def memory(self, x):
        return self.norm("encoder_norm", x) if self.cfg.pre_norm else x

    def project(self, y):
        """§3.4: the pre-softmax linear transformation is the (target) embedding matrix."""
        y = self.norm("decoder_norm", y) if self.cfg.pre_norm else y
        logits = y @ self.p["tgt_embed"].T
        return logits * math.sqrt(self.cfg.d_model) if self.form.logit_scale else logits

    def forward(self, src, tgt_in):
        """§3's logits from the tokens."""
        x, y = self.embed("src", src), self.embed("tgt", tgt_in)
        for i in range(self.cfg.N):
            x = self.encoder_layer(i, x, src)
        memory = self.memory(x)
        for i in range(self.cfg.N):
            y = self.decoder_layer(i, y, memory, src)
        return self.project(y)


def closest_form(params: dict, cfg, seen) -> Form:
    """The admitted form (the sinusoids' two layouts, positions from 0 or 1) closest to the embeddings the model
    fed its first layers; then the heads' packing (the paper's, or strided: W's rows in another order)."""
    layouts = ["interleaved"] if cfg.positional == "learned" else ["interleaved", "halves"]
    refs = {form: Reference(params, cfg, form, seen.masks) for form in [Form(layout=lay, origin=o) for o in (0, 1)
                                                                        for lay in layouts]}  # fmt: skip
    form = min(refs, key=lambda f: change(seen.io["enc_in"][0], refs[f].embed("src", seen.src).detach())
               + change(seen.io["dec_in"][0], refs[f].embed("tgt", seen.tgt_in).detach()))  # fmt: skip
    x, out, strided = seen.io["enc_in"][0].to(DTYPE), seen.io["enc_out"][0], replace(form, split="strided")
    off = [change(out, Reference(params, cfg, f, seen.masks).encoder_layer(0, x, seen.src)) for f in (form, strided)]
    return strided if off[1] <= 1e-3 < off[0] else form  # strided only where it matches and the paper's does not


def smoothed_target(targets, V: int, eps_ls: float, pad: int, *, form: str = "paper"):
    """§5.4's target per position (B, T, V), 0 at padding: 1 - eps_ls on the reference token and
    eps_ls / (V - 1) on each other (the paper's code's), or a known mistake's `form` (mistakes.LOSS)."""
    eps = 0.0 if form == "lost" else eps_ls
    other = {"torch": eps / V, "undivided": eps}.get(form, eps / max(V - 1, 1))
    on = 1 - eps + (eps / V if form == "torch" else 0.0)
    q = torch.full((*targets.shape, V), other, dtype=torch.float64)
    q.scatter_(-1, targets.clamp(min=0).unsqueeze(-1), on)
    return q if form == "padding" else q * (targets != pad).unsqueeze(-1)


def adam_step(before, grads: list, lrs: list[float], *, betas, eps: float, bias_correction: bool = True):
    """Adam (Kingma & Ba, §5.3) from `before` over `grads` (the last this update's) at rates `lrs`: after, float64."""
    (b1, b2), t = betas, len(grads)
    m = v = torch.zeros_like(before, dtype=torch.float64)
    for g in grads:
        m, v = b1 * m + (1 - b1) * g.double(), b2 * v + (1 - b2) * g.double().square()
    c1, c2 = (1 - b1**t, 1 - b2**t) if bias_correction else (1.0, 1.0)
    return before.double() - lrs[-1] * (m / c1) / ((v / c2).sqrt() + eps)


def paper_rate(step: int, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """§5.3: lrate = d_model^-0.5 · min(step_num^-0.5, step_num · warmup_steps^-1.5), times `scale`."""
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
