"""The Transformer of §3 and Adam of §5.3 written again from the paper's text alone, and the checks
that compare the experiment's own model and optimizer with them (the check stage runs both).

Every other check measures one part against what the paper says of it; a bug in how the parts are
put together (a residual dropped, a layer norm in the wrong place, positions added again outside
the embedding, dropout at inference) passes them all. Here the whole is compared with an
independent reference:

- `Reference`: the forward pass of §3 in a few dozen lines of plain tensor operations, in float64,
  over the model's own weights read by name from its state dict (nothing of aiayn.model is used):
  Embedding x sqrt(d_model) + PE (§3.4, §3.5), LayerNorm(x + Sublayer(x)) (§3.1; x + Sublayer(LN(x))
  and a final norm where the experiment sets pre_norm), MultiHead(Q, K, V) with softmax(QK^T /
  sqrt(d_k)) V over the keys that are not padding and, in the decoder's self-attention, not in the
  future (§3.2), FFN(x) = max(0, x W1 + b1) W2 + b2 (§3.3), logits by the target embedding (§3.4).
  Where the experiment deliberately differs from the paper (pre_norm, learned positions, another
  init, attention biases), the reference takes its setting; the sinusoids' two known layouts
  (interleaved as §3.5 writes them, or in halves as tensor2tensor lays them out) are both the paper's.
- `reference_check` ("reference"): the model's logits against the reference's on a real batch, in
  eval mode and in training mode (dropout at 0), and where they differ the first place that does,
  each part fed what the model really fed it (so a difference is where it arises, not where it
  shows): an embedding, the input between two layers, a sublayer's input (the residual and the norm
  around the sublayer before it), an attention or feed-forward network itself, the memory, the
  projection. The figure names the cause the difference fits (one or several) among the usual ones.
- `determinism` ("inference_determinism"): two identical passes in eval mode give the same output
  (dropout left on at inference gives two), the first module whose output differs named.
- `PAPER_ADAM` and `paper_rate`: §5.3's numbers and formula, for the optimizer check of
  aiayn.training.step_check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from aiayn.training.measure import Check

# §5.3: "We used the Adam optimizer with beta1 = 0.9, beta2 = 0.98 and epsilon = 10^-9"
PAPER_ADAM = {"adam_beta1": 0.9, "adam_beta2": 0.98, "adam_eps": 1e-9}
REFERENCE_TOLERANCE = 1e-3  # largest difference from the reference, relative to its largest magnitude
LN_EPS = 1e-5  # torch's and tensor2tensor's layer-norm epsilon alike are far below the tolerance's effect


def paper_rate(step: int, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """§5.3: lrate = d_model^-0.5 · min(step_num^-0.5, step_num · warmup_steps^-1.5), times `scale`."""
    return scale * (d_model**-0.5) * min(step**-0.5, step * warmup_steps**-1.5)


def sinusoids(length: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...), float64; "halves"
    puts every sine first and every cosine after (tensor2tensor's layout of the same table)."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    angle = pos / 10000.0 ** (np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((length, d_model))
    if layout == "halves":
        table[:, : d_model // 2], table[:, d_model // 2 :] = np.sin(angle), np.cos(angle)
    else:
        table[:, 0::2], table[:, 1::2] = np.sin(angle), np.cos(angle)
    return torch.from_numpy(table)


def change(got: torch.Tensor | None, want: torch.Tensor, keep: torch.Tensor | None = None) -> float:
    """The largest difference of `got` from `want` over the positions `keep` (B, T) keeps, relative
    to want's largest magnitude (at least 1); inf when `got` is missing, of another shape or not finite."""
    if got is None or tuple(got.shape) != tuple(want.shape):
        return math.inf
    got, want = got.double(), want.double()
    if keep is not None:
        got, want = got[keep], want[keep]
    if want.numel() == 0:
        return 0.0
    if not torch.isfinite(got).all():
        return math.inf
    return float((got - want).abs().max() / max(1.0, float(want.abs().max())))


# -- the forward pass of §3, from the paper ------------------------------------------------------
class Reference:
    """§3's Transformer over `params` (a state dict of aiayn's names, read as the paper's matrices)
    and the settings `cfg` (an aiayn.model.hparams.ModelConfig: sizes and the deliberate options)."""

    def __init__(self, params: dict[str, torch.Tensor], cfg, layout: str = "interleaved"):
        self.p = {k: v.detach().double() for k, v in params.items()}
        self.cfg, self.layout = cfg, layout

    def w(self, name: str) -> torch.Tensor | None:
        return self.p.get(name)

    def norm(self, prefix: str, x: torch.Tensor) -> torch.Tensor:
        """LayerNorm: each position's vector less its mean, over its standard deviation, then gain and bias."""
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).square().mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + LN_EPS) * self.p[f"{prefix}.weight"] + self.p[f"{prefix}.bias"]

    def linear(self, prefix: str, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.p[f"{prefix}.weight"].T
        bias = self.w(f"{prefix}.bias")
        return y if bias is None else y + bias

    def embed(self, side: str, tokens: torch.Tensor) -> torch.Tensor:
        """§3.4: the embedding times sqrt(d_model); §3.5: plus the positional encoding."""
        d = self.cfg.d_model
        x = self.p[f"{side}_embed.weight"][tokens] * math.sqrt(d)
        T = tokens.size(1)
        learned = self.w(f"{side}_embed.learned.weight")
        pe = learned[:T] if self.cfg.positional == "learned" else sinusoids(T, d, self.layout)
        return x + pe

    def attention(self, prefix: str, x: torch.Tensor, memory: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """§3.2.2: Concat(head_1..head_h) W^O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i over the
        keys `keep` (B, T, S) keeps."""
        h, d_k, d_v = self.cfg.h, self.cfg.d_k, self.cfg.d_v
        B, T, S = x.size(0), x.size(1), memory.size(1)
        q = self.linear(f"{prefix}.W_q", x).view(B, T, h, d_k).transpose(1, 2)
        k = self.linear(f"{prefix}.W_k", memory).view(B, S, h, d_k).transpose(1, 2)
        v = self.linear(f"{prefix}.W_v", memory).view(B, S, h, d_v).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d_k)  # (B, h, T, S)
        scores = scores.masked_fill(~keep[:, None], -math.inf)
        heads = torch.softmax(scores, dim=-1) @ v  # (B, h, T, d_v)
        return self.linear(f"{prefix}.W_o", heads.transpose(1, 2).reshape(B, T, h * d_v))

    def ffn(self, prefix: str, x: torch.Tensor) -> torch.Tensor:
        """§3.3: max(0, x W1 + b1) W2 + b2."""
        return self.linear(f"{prefix}.W_2", torch.clamp(self.linear(f"{prefix}.W_1", x), min=0))

    def sublayer(self, norm: str, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """§3.1: LayerNorm(x + Sublayer(x)) (the sublayer's output `out`); pre_norm: x + Sublayer(LN(x))."""
        return x + out if self.cfg.pre_norm else self.norm(norm, x + out)

    def sublayer_input(self, norm: str, x: torch.Tensor) -> torch.Tensor:
        """What a sublayer reads of the stream x: x itself (§3.1), LayerNorm(x) under pre_norm."""
        return self.norm(norm, x) if self.cfg.pre_norm else x

    def masks(self, src: torch.Tensor, tgt_in: torch.Tensor):
        """Which keys each query reads: source keys that are not padding; target keys not after the query."""
        pad = self.cfg.pad_id
        src_keep = (src != pad)[:, None, :]  # (B, 1, S)
        T = tgt_in.size(1)
        causal = torch.ones(T, T, dtype=torch.bool).tril()[None]  # (1, T, T)
        return src_keep.expand(-1, src.size(1), -1), causal.expand(tgt_in.size(0), -1, -1), src_keep

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> dict:
        """Every intermediate of §3's forward pass from the tokens alone: the embeddings, each layer's
        output, the memory and the logits."""
        enc_keep, dec_keep, cross_keep = self.masks(src, tgt_in)
        out: dict = {"enc": [], "dec": []}
        x = out["src_embed"] = self.embed("src", src)
        for i in range(self.cfg.N):
            x = self.encoder_layer(i, x, enc_keep)
            out["enc"].append(x)
        memory = out["memory"] = self.norm("encoder_norm", x) if self.cfg.pre_norm else x
        y = out["tgt_embed"] = self.embed("tgt", tgt_in)
        cross = cross_keep.expand(-1, tgt_in.size(1), -1)
        for i in range(self.cfg.N):
            y = self.decoder_layer(i, y, memory, dec_keep, cross)
            out["dec"].append(y)
        out["logits"] = self.project(y)
        return out

    def encoder_layer(self, i: int, x, keep):
        p = f"encoder.{i}"
        a = self.sublayer_input(f"{p}.sub.0.norm", x)
        x = self.sublayer(f"{p}.sub.0.norm", x, self.attention(f"{p}.self_attn", a, a, keep))
        return self.sublayer(f"{p}.sub.1.norm", x, self.ffn(f"{p}.ffn", self.sublayer_input(f"{p}.sub.1.norm", x)))

    def decoder_layer(self, i: int, y, memory, keep, cross):
        p = f"decoder.{i}"
        a = self.sublayer_input(f"{p}.sub.0.norm", y)
        y = self.sublayer(f"{p}.sub.0.norm", y, self.attention(f"{p}.self_attn", a, a, keep))
        a = self.sublayer_input(f"{p}.sub.1.norm", y)
        y = self.sublayer(f"{p}.sub.1.norm", y, self.attention(f"{p}.cross_attn", a, memory, cross))
        return self.sublayer(f"{p}.sub.2.norm", y, self.ffn(f"{p}.ffn", self.sublayer_input(f"{p}.sub.2.norm", y)))

    def project(self, y: torch.Tensor) -> torch.Tensor:
        """§3.4: the pre-softmax linear transformation shares the (target) embedding matrix."""
        if self.cfg.pre_norm:
            y = self.norm("decoder_norm", y)
        return y @ self.p["tgt_embed.weight"].T

    def missing(self) -> list[str]:
        """The paper's matrices this reference reads that the state dict lacks."""
        cfg, need = self.cfg, ["src_embed.weight", "tgt_embed.weight"]
        if cfg.positional == "learned":
            need += ["src_embed.learned.weight", "tgt_embed.learned.weight"]
        subs = {"encoder": (["self_attn"], 2), "decoder": (["self_attn", "cross_attn"], 3)}
        for stack, (attns, n_sub) in subs.items():
            for i in range(cfg.N):
                for a in attns:
                    need += [f"{stack}.{i}.{a}.W_{m}.weight" for m in "qkvo"]
                need += [f"{stack}.{i}.ffn.W_{m}.{t}" for m in "12" for t in ("weight", "bias")]
                need += [f"{stack}.{i}.sub.{j}.norm.{t}" for j in range(n_sub) for t in ("weight", "bias")]
        if cfg.pre_norm:
            need += [f"{s}_norm.{t}" for s in ("encoder", "decoder") for t in ("weight", "bias")]
        return [name for name in need if name not in self.p]

    def reads(self, name: str) -> bool:
        """Whether §3's forward pass reads the parameter `name` (attention biases too, where they are)."""
        if name in self.missing_free_names():
            return True
        return name.endswith(".bias") and any(f".W_{m}." in name for m in "qkvo")

    def missing_free_names(self) -> set[str]:
        saved, self.p = self.p, {}
        try:
            return set(self.missing())
        finally:
            self.p = saved


# -- what the model really computed ------------------------------------------------------------------
@dataclass
class Trace:
    """The inputs and outputs of the model's modules during one forward pass (first call of each)."""

    inputs: dict = field(default_factory=dict)  # module name -> (args, kwargs)
    outputs: dict = field(default_factory=dict)  # module name -> output tensor
    logits: torch.Tensor | None = None

    def arg(self, name: str, n: int = 0):
        args = self.inputs.get(name)
        if args is None:
            return None
        positional, kw = args
        if n < len(positional):
            return positional[n]
        return list(kw.values())[n - len(positional)] if n - len(positional) < len(kw) else None


def trace(model, src: torch.Tensor, tgt_in: torch.Tensor) -> Trace:
    """One forward pass of `model` with every named module's first input and output kept."""
    t = Trace()
    hooks = []
    for name, module in model.named_modules():
        if not name:
            continue

        def pre(m, args, kwargs, _name=name):
            t.inputs.setdefault(_name, (tuple(a.detach() if torch.is_tensor(a) else a for a in args), kwargs))

        def post(m, args, kwargs, out, _name=name):
            if torch.is_tensor(out):
                t.outputs.setdefault(_name, out.detach())

        hooks.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        hooks.append(module.register_forward_hook(post, with_kwargs=True))
    try:
        with torch.no_grad():
            t.logits = model(src, tgt_in).detach()
    finally:
        for h in hooks:
            h.remove()
    return t


# -- explaining a difference -----------------------------------------------------------------------
def fits(got: torch.Tensor | None, candidates: list[tuple[str, torch.Tensor]], keep=None) -> list[str]:
    """The causes among `candidates` (what a known mistake would have computed) that `got` equals."""
    if got is None:
        return []
    return [said for said, value in candidates if change(got, value, keep) <= REFERENCE_TOLERANCE * 10]


def scaled_by(got, want, keep=None) -> float | None:
    """c where got = c · want (least squares over `keep`), when that fits; else None."""
    if got is None or tuple(got.shape) != tuple(want.shape):
        return None
    g, w = (got.double(), want.double()) if keep is None else (got.double()[keep], want.double()[keep])
    denom = float(w.square().sum())
    if denom == 0 or not torch.isfinite(g).all():
        return None
    c = float((g * w).sum()) / denom
    return c if change(g, c * w) <= REFERENCE_TOLERANCE * 10 and abs(c - 1) > 1e-3 else None


@dataclass
class Finding:
    """The first part of the forward pass that differs from the reference, and the causes that fit."""

    where: str
    amount: float
    causes: list[str]

    def said(self) -> str:
        if not self.causes:
            return "a computation the paper does not describe (none of the usual mistakes fits the figure)"
        if len(self.causes) == 1:
            return self.causes[0]
        return "one of: " + "; ".join(self.causes) + " (the figure fits each)"


ROLES = {"self_attn": "self-attention", "cross_attn": "encoder-decoder attention", "ffn": "feed-forward network"}


class Locate:
    """Walks §3's forward pass in order over what the model's modules received and gave (a `Trace`),
    each part recomputed by the reference from the model's own input to it; `first()` is the first
    part that differs, with the causes (known mistakes) whose result the model's equals."""

    def __init__(self, model, ref: Reference, t: Trace, src, tgt_in):
        self.model, self.ref, self.t, self.src, self.tgt_in = model, ref, t, src, tgt_in
        pad = ref.cfg.pad_id
        self.src_real = src != pad  # (B, S)
        self.tgt_real = tgt_in != pad
        self.tgt_real[:, 0] = True  # BOS
        self.enc_keep, self.dec_keep, cross = ref.masks(src, tgt_in)
        self.cross_keep = cross.expand(-1, tgt_in.size(1), -1)

    def out(self, name):
        return self.t.outputs.get(name)

    def differ(self, got, want, keep, where, causes) -> Finding | None:
        amount = change(got, want, keep)
        if amount <= REFERENCE_TOLERANCE:
            return None
        if got is None:
            return Finding(where, amount, [f"{where} never computed (its module was not called)"])
        found = list(causes())
        if not found and not torch.isfinite(got.double()).all():
            found = ["values that are not finite (NaN or inf): a softmax over a row with no key left, or "
                     "over the wrong axis (a fully masked column divides 0 by 0)"]  # fmt: skip
        c = scaled_by(got, want, keep)
        if c is not None and not found:
            found = [f"the right values scaled by {c:.4g}"]
        return Finding(where, amount, found)

    def random(self, name, got, keep) -> list[str]:
        """When `name`'s module gives another output for the same input: a random draw in eval mode."""
        module = dict(self.model.named_modules()).get(name)
        args = self.t.inputs.get(name)
        if module is None or args is None or not torch.is_tensor(got):
            return []
        with torch.no_grad():
            again = module(*args[0], **args[1])
        if torch.is_tensor(again) and change(again, got, keep) > REFERENCE_TOLERANCE:
            return [f"a random draw in eval mode in {name}: dropout applied at inference (F.dropout without "
                    "training=self.training, or a module kept in training mode)"]  # fmt: skip
        return []

    def first(self) -> Finding | None:
        ref, cfg = self.ref, self.ref.cfg
        found = self.embedding("src", self.src, self.src_real)
        x = self.out("src_embed")
        for i in range(cfg.N):
            if found or x is None:
                return found
            before = "source embedding" if i == 0 else f"encoder layer {i}"
            found = self.between(f"encoder.{i}", x, self.src_real, before, f"encoder layer {i + 1}")
            found = found or self.layer("encoder", i, self.src_real)
            x = self.out(f"encoder.{i}")
        if found or x is None:
            return found
        memory = ref.norm("encoder_norm", x.double()) if cfg.pre_norm else x.double()
        found = self.embedding("tgt", self.tgt_in, self.tgt_real)
        y = self.out("tgt_embed")
        for i in range(cfg.N):
            if found or y is None:
                return found
            got = self.t.arg(f"decoder.{i}.cross_attn", 1)
            found = self.differ(got, memory, self.src_real,
                                f"the memory decoder layer {i + 1}'s encoder-decoder attention reads",
                                lambda got=got: self.memory_causes(got, memory))  # fmt: skip
            before = "target embedding" if i == 0 else f"decoder layer {i}"
            found = found or self.between(f"decoder.{i}", y, self.tgt_real, before, f"decoder layer {i + 1}")
            found = found or self.layer("decoder", i, self.tgt_real, memory)
            y = self.out(f"decoder.{i}")
        if found or y is None:
            return found
        final = "" if cfg.pre_norm else ", or a final layer norm the settings do not have"
        return self.differ(
            self.t.logits,
            ref.project(y.double()),
            self.tgt_real,
            "the logits (the projection)",
            lambda: [f"the pre-softmax projection not the target embedding matrix (§3.4){final}"],
        )

    def embedding(self, side, tokens, keep):
        got = self.out(f"{side}_embed")
        want = self.ref.embed(side, tokens)
        d = self.ref.cfg.d_model

        def causes():
            e = self.ref.p[f"{side}_embed.weight"][tokens]
            pe = want - e * math.sqrt(d)
            return fits(got, [
                ("the embeddings not multiplied by sqrt(d_model)", e + pe),
                ("the embeddings multiplied by d_model, not sqrt(d_model)", e * d + pe),
                ("the embeddings divided by sqrt(d_model), not multiplied", e / math.sqrt(d) + pe),
                ("the positional encoding added twice", want + pe),
                ("no positional encoding added", want - pe),
                ("the positional encoding scaled with the embeddings by sqrt(d_model)", (e + pe) * math.sqrt(d)),
            ], keep) or self.random(f"{side}_embed", got, keep)  # fmt: skip

        return self.differ(got, want, keep, f"the {'source' if side == 'src' else 'target'} embedding", causes)

    def between(self, name, previous, keep, before, after):
        got = self.t.arg(name, 0)
        d = self.ref.cfg.d_model

        def causes():
            T = previous.size(1)
            again = f"the positional encoding added again between the {before} and {after} (twice in all)"
            alt = [(again, previous.double() + sinusoids(T, d, lay)) for lay in ("interleaved", "halves")]
            alt.append((f"the {before}'s output scaled by sqrt(d_model) on the way", previous.double() * math.sqrt(d)))
            return list(dict.fromkeys(fits(got, alt, keep)))

        return self.differ(got, previous, keep, f"the input of {after} (the {before}'s output, changed on the way)",
                           causes)  # fmt: skip

    def memory_causes(self, got, memory):
        alt = [("the memory taken before the encoder's final layer norm", self.out(f"encoder.{self.ref.cfg.N - 1}"))]
        alt = alt if self.ref.cfg.pre_norm else []
        enc_in = self.t.arg("encoder.0", 0)
        if enc_in is not None:
            alt.append(("the decoder attending to the source embeddings, not the encoder's output", enc_in))
        for i in range(self.ref.cfg.N - 1):
            alt.append((f"the decoder attending to encoder layer {i + 1}'s output, not the last layer's",
                        self.out(f"encoder.{i}")))  # fmt: skip
        return fits(got, [(c, a) for c, a in alt if a is not None], self.src_real)

    def layer(self, stack, i, keep, memory=None):
        """One layer's sublayers in order, each recomputed from what the model fed it."""
        ref, p, who = self.ref, f"{stack}.{i}", f"{stack} layer {i + 1}"
        names = ["self_attn", "cross_attn", "ffn"] if stack == "decoder" else ["self_attn", "ffn"]
        x = self.t.arg(p, 0)
        if x is None:
            return Finding(who, math.inf, [f"{who} never called"])
        x = x.double()
        for j, name in enumerate(names):
            norm, role = f"{p}.sub.{j}.norm", f"{who}'s {ROLES[name]}"
            got_in = self.t.arg(f"{p}.{name}", 0)
            found = self.differ(got_in, ref.sublayer_input(norm, x), keep, f"the input of {role}",
                                lambda: self.input_causes(got_in, j, names, p, who, keep))  # fmt: skip
            if found:
                return found
            got_out = self.out(f"{p}.{name}")
            if name == "ffn":
                want = ref.ffn(f"{p}.ffn", got_in.double())
                found = self.differ(got_out, want, keep, role, lambda: self.ffn_causes(got_out, p, got_in, keep))
            else:
                kv = self.t.arg(f"{p}.{name}", 1)
                if name == "self_attn":
                    found = self.differ(kv, got_in, keep, f"the keys and values {role} reads",
                                        lambda: [f"{role} reading the memory, not its own input"]
                                        if memory is not None and fits(kv, [("", memory)]) else [])  # fmt: skip
                    mask = self.enc_keep if stack == "encoder" else self.dec_keep
                else:
                    mask = self.cross_keep
                if found or kv is None:
                    return found or Finding(f"the keys and values {role} reads", math.inf, [])
                want = ref.attention(f"{p}.{name}", got_in.double(), kv.double(), mask)
                found = self.differ(
                    got_out,
                    want,
                    keep,
                    role,
                    lambda: self.attention_causes(
                        got_out, f"{p}.{name}", got_in, kv, mask, keep, stack == "decoder" and name == "self_attn"
                    ),
                )
            if found:
                return found
            x = ref.sublayer(norm, x, got_out.double())  # the residual and norm around it, on the model's values
        got = self.out(p)
        return self.differ(got, x, keep, f"the output of {who} (the residual and layer norm around its last sublayer)",
                           lambda: fits(got, self.around(len(names) - 1, names, p, who), keep))  # fmt: skip

    def input_causes(self, got_in, j, names, p, who, keep):
        """The known mistakes that give sublayer j of layer `p` the input `got_in`."""
        ref, cfg = self.ref, self.ref.cfg
        x = self.stream_before(j, names, p)
        if x is None:
            return []
        norm = f"{p}.sub.{j}.norm"
        role = f"{who}'s {ROLES[names[j]]}"
        if cfg.pre_norm:
            alt = [(f"{role} reading x itself, without its layer norm (the settings say pre-LN)", x)]
        else:
            alt = [(f"{role} reading LayerNorm(x), the pre-LN variant (the settings say post-LN)", ref.norm(norm, x))]
        if j > 0:  # the stream came out of sublayer j-1: the mistakes of the residual and norm around it
            alt += [(c, ref.sublayer_input(norm, s)) for c, s in self.around(j - 1, names, p, who)]
        return fits(got_in, alt, keep)

    def stream_before(self, j, names, p):
        """The stream x that sublayer j of layer `p` reads (before its norm), from the model's own values."""
        x = self.t.arg(p, 0)
        x = None if x is None else x.double()
        for k in range(j):
            out = self.out(f"{p}.{names[k]}")
            if x is None or out is None:
                return None
            x = self.ref.sublayer(f"{p}.sub.{k}.norm", x, out.double())
        return x

    def around(self, j, names, p, who):
        """What the known mistakes of the residual and norm around sublayer j would give as the stream."""
        ref, cfg = self.ref, self.ref.cfg
        x, out = self.stream_before(j, names, p), self.out(f"{p}.{names[j]}")
        if x is None or out is None:
            return []
        out = out.double()
        norm, where = f"{p}.sub.{j}.norm", f"{who}'s {ROLES[names[j]]} sublayer"
        if cfg.pre_norm:
            return [
                (f"the residual connection dropped around {where}", out),
                (f"{where} in the post-LN form (the settings say pre-LN)", ref.norm(norm, x + out)),
                (f"the residual added twice around {where}", 2 * x + out),
            ]  # fmt: skip
        return [
            (f"the residual connection dropped around {where}: LayerNorm(Sublayer(x))", ref.norm(norm, out)),
            (f"the layer norm left out around {where}: x + Sublayer(x), or its pre-LN form", x + out),
            (f"the sublayer's output not added around {where}: LayerNorm(x)", ref.norm(norm, x)),
            (f"the residual added twice around {where}", ref.norm(norm, 2 * x + out)),
        ]

    def ffn_causes(self, got, p, x, keep):
        ref, x = self.ref, x.double()
        hidden = ref.linear(f"{p}.ffn.W_1", x)
        bare = torch.clamp(x @ ref.p[f"{p}.ffn.W_1.weight"].T, min=0) @ ref.p[f"{p}.ffn.W_2.weight"].T
        return fits(got, [
            ("the feed-forward network with GELU, not ReLU (§3.3)", ref.linear(f"{p}.ffn.W_2", F.gelu(hidden))),
            ("the feed-forward network without its ReLU", ref.linear(f"{p}.ffn.W_2", hidden)),
            ("the feed-forward network without its biases", bare),
        ], keep)  # fmt: skip

    def attention_causes(self, got, p, q_in, kv, mask, keep, causal):
        ref, cfg = self.ref, self.ref.cfg
        q_in, kv = q_in.double(), kv.double()
        B, T, S = q_in.size(0), q_in.size(1), kv.size(1)
        h, d_k, d_v = cfg.h, cfg.d_k, cfg.d_v
        q = ref.linear(f"{p}.W_q", q_in).view(B, T, h, d_k).transpose(1, 2)
        k = ref.linear(f"{p}.W_k", kv).view(B, S, h, d_k).transpose(1, 2)
        v = ref.linear(f"{p}.W_v", kv).view(B, S, h, d_v).transpose(1, 2)
        raw = q @ k.transpose(-1, -2)

        def soft(scale, keys, dim=-1):
            return torch.softmax((raw * scale).masked_fill(~keys[:, None], -math.inf), dim=dim)

        def heads(weights):
            return ref.linear(f"{p}.W_o", (weights @ v).transpose(1, 2).reshape(B, T, h * d_v))

        s = 1 / math.sqrt(d_k)
        alt = [
            ("attention scaled by 1/d_k (1/sqrt(d_k) twice), not 1/sqrt(d_k)", heads(soft(1 / d_k, mask))),
            ("attention not scaled (no 1/sqrt(d_k))", heads(soft(1.0, mask))),
            ("attention scaled by 1/sqrt(d_model), not 1/sqrt(d_k)", heads(soft(cfg.d_model**-0.5, mask))),
            ("the softmax taken over the queries, not the keys", heads(soft(s, mask, dim=-2))),
            ("the output projection W^O skipped", (soft(s, mask) @ v).transpose(1, 2).reshape(B, T, h * d_v)),
        ]
        # the heads split by a view without the transpose (B, T, h*d) -> (B, h, T, d): positions mixed
        qv = ref.linear(f"{p}.W_q", q_in).reshape(B, h, T, d_k)
        kv_ = ref.linear(f"{p}.W_k", kv).reshape(B, h, S, d_k)
        vv = ref.linear(f"{p}.W_v", kv).reshape(B, h, S, d_v)
        mixed = torch.softmax((qv @ kv_.transpose(-1, -2) * s).masked_fill(~mask[:, None], -math.inf), -1) @ vv
        alt.append(("the heads split by a view without the transpose: positions and heads mixed (§3.2.2)",
                    ref.linear(f"{p}.W_o", mixed.transpose(1, 2).reshape(B, T, h * d_v))))  # fmt: skip
        if causal:
            alt.append(("no causal mask: the decoder's self-attention reads future positions",
                        heads(soft(s, torch.ones_like(mask)))))  # fmt: skip
            alt.append(
                (
                    "the causal mask off by one: a position does not attend to itself",
                    heads(soft(s, torch.ones(T, T, dtype=torch.bool).tril(-1)[None].expand(B, -1, -1))),
                )
            )
        else:
            alt.append(
                ("the padding mask not applied: attention reads the padding", heads(soft(s, torch.ones_like(mask))))
            )
        return fits(got, alt, keep)


def layout_of(model, cfg) -> str:
    """The sinusoids' layout the model's source embedding uses (both are §3.5's table)."""
    if cfg.positional == "learned":
        return "interleaved"
    embed = getattr(model, "src_embed", None)
    if embed is None:
        return "interleaved"
    T = 16
    tokens = torch.full((1, T), min(3, cfg.src_vocab - 1), dtype=torch.long)
    try:
        with torch.no_grad():
            out = embed(tokens)[0].double()
    except Exception:  # a model of another shape: the paper's layout
        return "interleaved"
    got = out - out[0]

    def distance(layout):
        table = sinusoids(T, cfg.d_model, layout)
        return float((got - (table - table[0])).abs().max())

    return min(("interleaved", "halves"), key=distance)


def compare(model, batch) -> tuple[float, Finding | None]:
    """The model's logits against the reference's on `batch`, and the first place that differs."""
    cfg = model.cfg
    ref = Reference(model.state_dict(), cfg, layout_of(model, cfg))
    want = ref.forward(batch.src, batch.tgt_in)
    t = trace(model, batch.src, batch.tgt_in)
    keep = batch.tgt_in != cfg.pad_id
    keep[:, 0] = True
    amount = change(t.logits, want["logits"], keep)
    if amount <= REFERENCE_TOLERANCE:
        return amount, None
    found = Locate(model, ref, t, batch.src, batch.tgt_in).first()
    return amount, found or Finding("between the layers (every part agrees on its own input)", amount, [])


def named(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def reference_check(model, batch) -> Check:
    """The `reference` check of the module docstring: eval mode, then training mode with every
    dropout at 0 (a path only training takes), the model left as it was."""
    cfg = model.cfg
    missing = Reference(model.state_dict(), cfg).missing()
    if missing:
        return Check(
            "reference",
            False,
            f"the model has no parameter {named(missing)}",
            "every matrix of §3 under its name (the reference reads the model's own weights)",
            "a layer, norm or projection of §3 missing from the model, or renamed",
            {"missing": missing},
        )  # fmt: skip
    extra = [n for n, _ in model.named_parameters() if not Reference({}, cfg).reads(n)]
    if extra:
        return Check(
            "reference",
            False,
            f"the model has parameters §3 does not: {named(extra)}",
            "the parameters of §3 only (with the experiment's settings: pre_norm's final norms, learned positions)",
            "a layer the paper does not have (a final layer norm under post-LN, an untied projection, an extra "
            "linear): more parameters than the paper's, a model that trains differently",
            {"extra": extra},
        )  # fmt: skip
    was = model.training
    results = {}
    try:
        model.eval()
        results["eval"] = compare(model, batch)
        dropouts = [(m, m.p) for m in model.modules() if isinstance(m, torch.nn.Dropout)]
        attn = [(m, m.P_drop_attn) for m in model.modules() if hasattr(m, "P_drop_attn")]
        model.train()
        for m, _ in dropouts:
            m.p = 0.0
        for m, _ in attn:
            m.P_drop_attn = 0.0
        try:
            results["training"] = compare(model, batch)
        finally:
            for m, p in dropouts:
                m.p = p
            for m, p in attn:
                m.P_drop_attn = p
    finally:
        model.train(was)
    failed = [(mode, amount, f) for mode, (amount, f) in results.items() if f is not None]
    figures = ", ".join(f"{mode} {amount:.2g}" for mode, (amount, _) in results.items())
    if not failed:
        return Check(
            "reference",
            True,
            f"the logits equal those of §3's forward pass written from the paper (largest difference: {figures})",
            f"at most {REFERENCE_TOLERANCE:g} in eval and training mode",
            "",
            {mode: amount for mode, (amount, _) in results.items()},
        )
    mode, amount, f = failed[0]
    only = " (in training mode only: a path eval mode does not take)" if mode == "training" and len(failed) == 1 else ""
    return Check(
        "reference",
        False,
        f"the logits differ from those of §3's forward pass written from the paper by {amount:.2g} ({figures}); "
        f"the first part that differs on its own input: {f.where}, by {f.amount:.2g}{only}",
        f"at most {REFERENCE_TOLERANCE:g} in eval and training mode",
        f.said(),
        {**{m: a for m, (a, _) in results.items()}, "where": f.where, "causes": f.causes, "mode": mode},
    )


def apart(got, want) -> float:
    """How far two passes' outputs are apart, NaN where both have NaN counting as the same."""
    if got is None or tuple(got.shape) != tuple(want.shape):
        return math.inf
    same_nan = torch.isnan(got) & torch.isnan(want)
    diff = (got.double() - want.double()).abs().masked_fill(same_nan, 0.0).nan_to_num(math.inf)
    return float(diff.max() / max(1.0, float(want.double().abs().nan_to_num(0).max()))) if diff.numel() else 0.0


def determinism(model, batch) -> Check:
    """Two identical forward passes in eval mode; where they differ, the first module whose output does."""
    was = model.training
    model.eval()
    try:
        a = trace(model, batch.src, batch.tgt_in)
        b = trace(model, batch.src, batch.tgt_in)
    finally:
        model.train(was)
    amount = apart(b.logits, a.logits)
    first = next((name for name in a.outputs if apart(b.outputs.get(name), a.outputs[name]) > 0), None)
    passed = amount == 0 or (amount <= 1e-6 and first is None)
    figure = f"two identical passes in eval mode gave logits {amount:.2g} apart"
    if not passed and first:
        figure += f", first in {first}"
    return Check(
        "inference_determinism",
        passed,
        figure,
        "the same logits",
        "a random draw in eval mode: dropout applied at inference (F.dropout without training=self.training, or "
        "a module kept in training mode): decoding and the dev figures are noisy and worse",
        {"difference": amount, "first": first},
    )


def residual_dropout(model, batch, seed: int = 0) -> Check:
    """§5.4's residual dropout, in training mode at the experiment's P_drop: each sublayer's output
    is dropped before it is added (post-LN: the stream after a sublayer is not LayerNorm(x +
    Sublayer(x)) undropped; pre-LN: a layer's output is not x + the sum of its sublayers undropped),
    and the sums of the embeddings and positions are dropped."""
    cfg = model.cfg
    if cfg.P_drop == 0:
        return Check("residual_dropout", True, "P_drop is 0: nothing is dropped", "no dropout", "", {"P_drop": 0.0})
    ref = Reference(model.state_dict(), cfg, layout_of(model, cfg))
    was = model.training
    model.train()
    try:
        torch.manual_seed(seed)
        t = trace(model, batch.src, batch.tgt_in)
    finally:
        model.train(was)
    undropped = []
    real = {"src": batch.src != cfg.pad_id, "tgt": batch.tgt_in != cfg.pad_id}
    for side, tokens in (("src", batch.src), ("tgt", batch.tgt_in)):
        if change(t.outputs.get(f"{side}_embed"), ref.embed(side, tokens), real[side]) <= REFERENCE_TOLERANCE:
            undropped.append(f"the {'source' if side == 'src' else 'target'} embeddings")
    for stack, names in (("encoder", ["self_attn", "ffn"]), ("decoder", ["self_attn", "cross_attn", "ffn"])):
        keep = real["src" if stack == "encoder" else "tgt"]
        for i in range(cfg.N):
            p = f"{stack}.{i}"
            x, outs = t.arg(p, 0), [t.outputs.get(f"{p}.{n}") for n in names]
            if x is None or any(o is None for o in outs):
                continue
            if cfg.pre_norm:
                if change(t.outputs.get(p), x.double() + sum(o.double() for o in outs), keep) <= REFERENCE_TOLERANCE:
                    undropped.append(f"{stack} layer {i + 1}'s sublayers")
                continue
            streams = [x] + [t.arg(f"{p}.{n}", 0) for n in names[1:]] + [t.outputs.get(p)]
            for j, name in enumerate(names):
                if streams[j] is None or streams[j + 1] is None:
                    continue
                plain = ref.norm(f"{p}.sub.{j}.norm", streams[j].double() + outs[j].double())
                if change(streams[j + 1], plain, keep) <= REFERENCE_TOLERANCE:
                    undropped.append(f"{stack} layer {i + 1}'s {ROLES[name]}")
    return Check(
        "residual_dropout",
        not undropped,
        "in training mode, "
        + (
            f"nothing dropped at {', '.join(undropped[:3])}"
            + (f" and {len(undropped) - 3} more" if len(undropped) > 3 else "")
            if undropped
            else "every sublayer's output and the embeddings are dropped"
        ),  # fmt: skip
        f"dropout at P_drop = {cfg.P_drop:g} on each sublayer output before the residual and on the embeddings (§5.4)",
        "the residual dropout of §5.4 left out (a dropout dropped from the sublayer connection or the embedding): "
        "the model overfits and falls short of the paper's BLEU",
        {"undropped": undropped, "P_drop": cfg.P_drop},
    )
