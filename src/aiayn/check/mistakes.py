"""Known mistakes as data, each a change of the reference that reproduces it; `locate` finds the
first part of a forward pass that differs (each part fed what the model fed it) and the mistakes
whose reproduction matches it there; none matching, only where and by how much."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field, replace

from aiayn.check.reference import DTYPE, Form, Reference, change, sinusoids
from aiayn.errors import UserError

TOLERANCE = 1e-3  # a part's largest difference from the reference, relative to its largest magnitude
MATCH = 1e-2  # how close a mistake's reproduction must come to what the model did to be named
ATTENTION, SELF, PADDED, FFN, ANY = ("self", "cross"), ("causal",), ("pad",), ("ffn",), ("self", "cross", "ffn")
# (what the mistake is, the reference's change that reproduces it, the sublayers it can be at)
LAYER = [
    ("attention scaled by 1/d_k (1/sqrt(d_k) twice)", {"attn_scale": "dk"}, ATTENTION),
    ("attention not scaled by 1/sqrt(d_k)", {"attn_scale": "none"}, ATTENTION),
    ("attention scaled by 1/sqrt(d_model), not 1/sqrt(d_k)", {"attn_scale": "sqrt_d_model"}, ATTENTION),
    ("the softmax taken over the queries, not the keys", {"softmax_dim": -2}, ATTENTION),
    ("masked scores filled with 0, not -inf", {"fill": 0.0}, ATTENTION),
    ("no causal mask: it reads the future", {"causal": "none"}, SELF),
    ("a causal mask that hides each position from itself", {"causal": "strict"}, SELF),
    ("no padding mask: it reads the padding", {"pad_mask": "all"}, PADDED),
    ("the padding mask inverted: it reads the padding alone", {"pad_mask": "inverted"}, PADDED),
    ("the heads split by a view without the transpose (§3.2.2)", {"split": "view"}, ATTENTION),
    ("the heads merged by a view without the transpose (§3.2.2)", {"merge": "view"}, ATTENTION),
    ("the output projection W^O skipped", {"w_o": False}, ATTENTION),
    ("GELU in place of ReLU (§3.3)", {"act": "gelu"}, FFN),
    ("no ReLU (§3.3)", {"act": "none"}, FFN),
    ("no biases (§3.3)", {"ffn_bias": False}, FFN),
    ("the residual connection dropped", {"wrap": "no_residual"}, ANY),
    ("the layer norm left out", {"wrap": "no_norm"}, ANY),
    ("the sublayer's output not added", {"wrap": "no_sublayer"}, ANY),
    ("the residual added twice", {"wrap": "twice"}, ANY),
    ("pre-LN, x + Sublayer(LayerNorm(x)), where the settings say post-LN (§3.1)", {"wrap": "pre"}, ANY),
    ("post-LN where the settings say pre-LN", {"wrap": "post"}, ANY),
    ("dropout after the layer norm, not on the sublayer's output before the residual add (§5.4)",
     {"wrap": "drop_after_norm"}, ANY),
    ("dropout on the sublayer's input, not on its output (§5.4)", {"wrap": "drop_input"}, ANY),
]  # fmt: skip
EMBEDDING = [
    ("the embeddings not multiplied by sqrt(d_model) (§3.4)", {"emb_scale": False}),
    ("the positional encoding added twice", {"positions": 2}),
    ("no positional encoding added (§3.5)", {"positions": 0}),
    ("the positional encoding scaled with the embeddings (added before the x sqrt(d_model))", {"pos_scaled": True}),
]
PROJECTION = [("the logits scaled by sqrt(d_model) (§3.4 scales the embeddings, not logits)", {"logit_scale": True})]
LOSS = [
    ("torch's label_smoothing=eps_ls convention: eps_ls/V on every class, the reference token too, not the paper's "
     "code's eps_ls/(V-1) on the others (pass eps_ls·V/(V-1) to torch)", "torch"),
    ("no smoothing: eps_ls lost between the settings and the loss (a one-hot target)", "lost"),
    ("eps_ls on every other class, not divided by V - 1: a target that is no distribution", "undivided"),
    ("padding targets counted in the loss", "padding"),
]  # fmt: skip
OPTIMIZER = [  # (the mistake, the Adam it is, from the paper's: {"betas": ..., "eps": ...})
    ("Adam's beta1 and beta2 swapped", lambda adam: {"betas": adam["betas"][::-1]}),
    ("Adam without its bias correction", lambda adam: {"bias_correction": False}),
    ("Adam's eps at torch's default, 1e-8, not the setting", lambda adam: {"eps": 1e-8}),
    ("Adam's betas at torch's default, (0.9, 0.999), not the settings'", lambda adam: {"betas": (0.9, 0.999)}),
]
SUBLAYERS = {"encoder": {"self": "self-attention", "ffn": "feed-forward network"}}
SUBLAYERS["decoder"] = {"self": "self-attention", "cross": "encoder-decoder attention", "ffn": "feed-forward network"}
SPECIAL = {"causal": [("decoder", "self")], "pad": [("encoder", "self"), ("decoder", "cross")]}


@dataclass
class Departure:
    """Where a run first departs from the paper, by how much, what was seen, the mistakes that reproduce it."""

    quantity: str
    where: str
    amount: float | None = None
    causes: list[str] = field(default_factory=list)
    seen: str = ""
    update: int | None = None

    def said(self) -> str:
        at = f"update {self.update}: " if self.update else ""
        if not self.quantity:  # the run failed: `failed` says where
            return at + self.seen
        by = ("" if self.amount is None else f" by {self.amount:.3g}") + f": {self.seen}" * bool(self.seen)
        text = f"{at}the run departs from the paper's in {self.quantity} at {self.where}{by}"
        if self.causes:
            return f"{text}; it is what {' or '.join(self.causes)} computes"
        return text if self.seen else text + "; none of the known mistakes reproduces it"


def failed(error: Exception) -> str:
    """An error in the check, said: where in the experiment's code, or that the reference cannot read the map."""
    if isinstance(error, (MemoryError, OSError, UserError)):
        raise error  # the commands' error boundary says these (below: run.py's frames stand in for torch's calls)
    paths = [(f.filename.replace("\\", "/"), f.lineno) for f in traceback.extract_tb(error.__traceback__)]
    where = ["?", *(f"{p.split('/aiayn/')[-1]}:{n}" for p, n in paths if "/aiayn/" in p and "/check/run." not in p)][-1]
    if where.startswith(("check/reference", "check/mistakes")):
        return f"the reference cannot read the model through its map (paper_map): {type(error).__name__}: {error}"
    if where.startswith("check/"):  # reading what the experiment's code returned
        return f"what the experiment's code returned cannot be read ({type(error).__name__} at {where}: {error})"
    return f"the experiment's code raised {type(error).__name__} at {where}: {error}"


def layer_mistakes(stack: str, layer: str, pre_norm: bool):
    """(cause, Form changes) of every layer mistake at each sublayer it can be at, and at all at once."""
    kinds, named = list(SUBLAYERS[stack]), list(SUBLAYERS[stack].values())
    for said, changes, where in LAYER:
        if changes.get("wrap") == ("post" if not pre_norm else "pre"):
            continue
        spots = [j for j, kind in enumerate(kinds) if kind in where or (stack, kind) in SPECIAL.get(where[0], ())]
        for at in ([None] if len(spots) > 1 else []) + spots:
            part = f"{layer}'s {named[at]}" if at is not None else f"every sublayer of {layer}"
            yield f"{said}, at {part}", {**changes, "at": at}


def parts(seen, cfg):
    """Each part of the pass `seen`, in order: (name, the model's value, the reference on its input, mistakes, side)."""
    src, tgt_in, io = seen.src, seen.tgt_in, {k: [t.to(DTYPE) for t in v] for k, v in seen.io.items()}
    yield "the source embedding", seen.io["enc_in"][0], lambda r: r.embed("src", src), EMBEDDING, "src"
    for stack, side, outs in (("encoder", "src", seen.io["enc_out"]), ("decoder", "tgt", seen.io["dec_out"])):
        ins = io[f"{stack[:3]}_in"]
        if stack == "decoder":
            yield "the memory", seen.io["dec_mem"][0], lambda r: r.memory(io["enc_out"][-1]), [], "src"
            yield "the target embedding", seen.io["dec_in"][0], lambda r: r.embed("tgt", tgt_in), EMBEDDING, "tgt"
        for i in range(cfg.N):
            if i:
                below = io[f"{stack[:3]}_out"][i - 1]
                known = [("the positional encoding added again between the layers",
                          below + sinusoids(below.size(1), cfg.d_model).to(DTYPE)),
                         ("every layer fed the embedding, not the layer below's output", ins[0])]  # fmt: skip
                yield f"the input of {stack} layer {i + 1}", seen.io[f"{stack[:3]}_in"][i], lambda r, _o=below: _o, \
                    known, side  # fmt: skip
            layer = (lambda r, _i=i, _x=ins: r.encoder_layer(_i, _x[_i], src)) if stack == "encoder" else \
                (lambda r, _i=i, _y=ins: r.decoder_layer(_i, _y[_i], io["dec_mem"][_i], src))  # fmt: skip
            yield f"{stack} layer {i + 1}", outs[i], layer, "", side
    yield "the projection", seen.logits, lambda r: r.project(io["dec_out"][-1]), PROJECTION, "tgt"


def locate(seen, params: dict, cfg, base: Form) -> Departure | None:
    """The first part of `seen` unlike the reference of form `base` (the pass's masks), the mistakes reproducing it."""
    ref = Reference(params, cfg, base, seen.masks)
    keep = {"src": seen.src != cfg.pad_id, "tgt": seen.tgt_in != cfg.pad_id}
    for name, got, compute, mistakes, side in parts(seen, cfg):
        amount = change(got, compute(ref), keep[side])
        if amount <= TOLERANCE:
            continue
        if mistakes == "":  # a layer: its mistakes at each sublayer
            mistakes = list(layer_mistakes(name.split()[0], name, cfg.pre_norm))
        causes = []
        for said, changes in mistakes:  # what the model fed a layer, computed; or the reference changed
            try:  # a change that cannot be computed at these sizes (W^O skipped where h d_v != d_model) is none
                value = compute(Reference(params, cfg, replace(base, **changes), seen.masks, base=base)) \
                    if isinstance(changes, dict) else changes  # fmt: skip
            except RuntimeError:
                continue
            if change(got, value, keep[side]) <= MATCH:
                causes.append(said)
        return Departure("the forward pass", name, amount, causes)
    return None
