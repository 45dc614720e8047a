"""The Transformer of §3, with the regularization of §5.4, built exactly as the paper describes.

Names follow the paper: N layers per stack, width d_model, FFN width d_ff, h heads of query/key
width d_k and value width d_v, residual dropout P_drop. Post-norm sub-layers
LayerNorm(x + Dropout(Sublayer(x))) (§3.1, §5.4); `pre_norm` gives the later variant
x + Dropout(Sublayer(LayerNorm(x))) with a final LayerNorm per stack, for users who want it.

The decoder runs either over a whole target prefix (training, `forward`) or one step at a time
(`decode_step`) over keys/values that the caller keeps (`aiayn.model.beam.BeamState`, which beam
search also reorders, as fairseq's generator does), and both give the same outputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model.hparams import ModelConfig


def sinusoidal_positions(length: int, d_model: int, offset: int = 0) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...) (§3.5). Shape (length, d_model)."""
    # computed in float64 and rounded once (as Marian's table in transformers is: an export's
    # positions are then ours exactly); float32 arithmetic would be off by ~3e-5 at position 1000
    pos = torch.arange(offset, offset + length, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    angle = pos / torch.pow(10000.0, torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.empty(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class Embedding(nn.Module):
    """Token embedding × √d_model plus positional encoding, then dropout (§3.4, §3.5, §5.4)."""

    def __init__(self, weight: nn.Parameter, cfg: ModelConfig):
        super().__init__()
        self.weight = weight  # (V, d_model), possibly shared with other embeddings / the projection
        self.scale = math.sqrt(cfg.d_model)
        self.d_model = cfg.d_model
        self.learned = nn.Embedding(cfg.max_positions, cfg.d_model) if cfg.positional == "learned" else None
        self.dropout = nn.Dropout(cfg.P_drop)

    def positions(self, length: int, offset: int, device) -> Tensor:
        if self.learned is not None:
            if offset + length > self.learned.num_embeddings:
                raise ValueError(f"position {offset + length} exceeds max_positions={self.learned.num_embeddings}")
            return self.learned(torch.arange(offset, offset + length, device=device))
        return sinusoidal_positions(length, self.d_model, offset).to(device)

    def forward(self, tokens: Tensor, offset: int = 0) -> Tensor:
        x = F.embedding(tokens, self.weight) * self.scale  # (B, T, d_model)
        pos = self.positions(tokens.size(1), offset, tokens.device)  # (T, d_model)
        return self.dropout(x + pos.to(x.dtype))


def attention_weights(
    q: Tensor, k: Tensor, mask: Tensor | None = None, causal: bool = False, *, scale: float | None = None
) -> Tensor:
    """softmax(Q K^T · scale), masked positions at weight 0 (§3.2.1; scale 1/sqrt(d_k) unless given): (B, h, T, S)."""
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-1, -2) * scale  # (B, h, T, S)
    if causal:
        T, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V) (§3.2.2).

    d_k and d_v are set independently of d_model (Table 3 rows A and B). The projections carry no
    biases under the paper's code's initialisation (init "t2t": tensor2tensor's use_bias=False;
    base 63.0M, big 214.2M with a 37k vocabulary) and biases under fairseq's (63.1M, 214.2M); the
    paper does not say, and Table 3 says 65M and 213M. Scaled dot-product attention (§3.2.1) goes
    through `F.scaled_dot_product_attention`, so fused kernels are used where the hardware has them.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.h, self.d_k, self.d_v = cfg.h, cfg.d_k, cfg.d_v
        bias = cfg.attention_bias
        self.W_q = nn.Linear(cfg.d_model, cfg.h * cfg.d_k, bias=bias)
        self.W_k = nn.Linear(cfg.d_model, cfg.h * cfg.d_k, bias=bias)
        self.W_v = nn.Linear(cfg.d_model, cfg.h * cfg.d_v, bias=bias)
        self.W_o = nn.Linear(cfg.h * cfg.d_v, cfg.d_model, bias=bias)
        self.P_drop_attn = cfg.P_drop_attn
        self.scale = 1 / math.sqrt(cfg.d_k)  # §3.2.1: "we scale the dot products by 1/sqrt(d_k)"
        self.recorded: list[torch.Tensor] | None = None  # set to [] to keep attention weights (figures)

    def split(self, x: Tensor, width: int) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.h, width).transpose(1, 2)  # (B, h, T, width)

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        return self.split(self.W_k(memory), self.d_k), self.split(self.W_v(memory), self.d_v)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *, causal: bool = False) -> Tensor:
        """q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v); mask broadcastable to (B, h, T, S), True = attend:
        softmax(Q K^T / sqrt(d_k)) V, masked (and dropped out at P_drop_attn), by torch's fused kernel."""
        p = self.P_drop_attn if self.training else 0.0
        if self.recorded is not None:  # the same weights, computed in the open for inspection
            self.recorded.append(attention_weights(q, k, mask, causal, scale=self.scale).detach())
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, scale=self.scale)
        B, _, T, _ = out.shape  # (B, h, T, d_v)
        return self.W_o(out.transpose(1, 2).reshape(B, T, self.h * self.d_v))  # (B, T, d_model)

    def forward(self, x: Tensor, memory: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        q = self.split(self.W_q(x), self.d_k)
        k, v = self.keys_values(memory)
        return self.attend(q, k, v, mask, causal=causal)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (§3.3)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.W_2 = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.W_2(F.relu(self.W_1(x)))


class SublayerConnection(nn.Module):
    """LayerNorm(x + Dropout(Sublayer(x))) (§3.1, §5.4), or x + Dropout(Sublayer(LayerNorm(x))) when pre_norm."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model)
        self.dropout = nn.Dropout(cfg.P_drop)
        self.pre_norm = cfg.pre_norm

    def forward(self, x: Tensor, sublayer) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg)
        self.ffn = FeedForward(cfg)
        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(2)])

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        x = self.sub[0](x, lambda y: self.self_attn(y, y, src_mask))
        return self.sub[1](x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg)
        self.cross_attn = MultiHeadAttention(cfg)
        self.ffn = FeedForward(cfg)
        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(3)])

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor) -> Tensor:
        x = self.sub[0](x, lambda y: self.self_attn(y, y, causal=True))
        x = self.sub[1](x, lambda y: self.cross_attn(y, memory, src_mask))
        return self.sub[2](x, self.ffn)

    def step(self, x: Tensor, state, layer: int) -> Tensor:
        """One target position x (rows, 1, d_model), attending over the prefix `state` keeps and the memory."""

        def self_attention(y: Tensor) -> Tensor:
            q = self.self_attn.split(self.self_attn.W_q(y), self.self_attn.d_k)
            k, v = state.extend(layer, *self.self_attn.keys_values(y))
            return self.self_attn.attend(q, k, v, None)  # the prefix holds no future positions

        def cross_attention(y: Tensor) -> Tensor:
            # the `group` consecutive rows that read one memory row attend as `group` query
            # positions of it: the memory's keys/values exist once per memory row
            attn, rows, g = self.cross_attn, y.size(0), state.group
            q = attn.W_q(y).view(rows // g, g, attn.h, attn.d_k).transpose(1, 2)  # (A, h, g, d_k)
            k, v = state.memory[layer]  # (A, h, S, d_k), (A, h, S, d_v)
            return attn.attend(q, k, v, state.memory_mask).reshape(rows, 1, -1)

        x = self.sub[0](x, self_attention)
        x = self.sub[1](x, cross_attention)
        return self.sub[2](x, self.ffn)


def is_linear(m) -> bool:
    """A position-wise linear map: nn.Linear, or a convolution of kernel size 1 (§3.3's other wording)."""
    return isinstance(m, nn.Linear) or isinstance(m, nn.Conv1d) and m.kernel_size == (1,) and m.groups == 1


def linears_of(part: nn.Module) -> list[nn.Module]:
    """A sublayer's linears in §3's order: by the paper's names where it has them all, else in definition order."""
    found = [m for m in part.modules() if is_linear(m)]
    named = [getattr(part, n, None) for n in (("W_1", "W_2") if len(found) == 2 else ("W_q", "W_k", "W_v", "W_o"))]
    return named if all(is_linear(m) for m in named) else found


def chained(linears: list[nn.Module]) -> bool:
    """Two linears, the first's outputs the second's inputs: an FFN (an attention's fused W^Q W^K W^V is not)."""
    return len(linears) == 2 and linears[0].weight.size(0) == linears[1].weight.size(1)


def sublayers_of(layer: nn.Module) -> list[nn.Module]:
    """A layer's sublayers in §3's order (self-attention, encoder-decoder attention, FFN), whatever order it
    defines them in: its attributes self_attn, cross_attn and ffn; one named otherwise is found by what it holds
    (2 chained linears: the FFN; else an attention, the free ones in definition order); none named: the layer."""
    slots = {a: getattr(layer, a, None) for a in ("self_attn", "cross_attn", "ffn")}
    if all(m is None for m in slots.values()):
        return [layer]
    taken = {id(m) for m in slots.values()}
    for child in (c for c in layer.children() if id(c) not in taken):
        found = [m for m in child.modules() if is_linear(m)]
        free = [a for a, m in slots.items() if found and m is None and (a == "ffn") == chained(found)]
        slots |= {free[0]: child} if free else {}
    return [m for m in slots.values() if m is not None]


def matrices_of(part: nn.Module, widths: list[int]) -> list[tuple[Tensor, Tensor | None]]:
    """A sublayer's (weight, bias) in §3's order, a fused linear (W^Q W^K W^V as one, or W^K W^V; torch's
    nn.MultiheadAttention's in_proj) split by rows into the matrices of `widths` (their output widths, an
    attention's: h d_k, h d_k, h d_v, d_model)."""
    torchs = [m for m in part.modules() if getattr(m, "in_proj_weight", None) is not None]  # nn.MultiheadAttention
    pairs = [(m.in_proj_weight, m.in_proj_bias) for m in torchs] + [(m.weight, m.bias) for m in linears_of(part)]
    out = []
    for weight, bias in pairs:
        at, cut = len(out), [weight.size(0)]
        fused = [widths[at:n] for n in range(at + 2, len(widths) + 1) if sum(widths[at:n]) == cut[0]]
        cut = fused[0] if fused and len(pairs) < len(widths) else cut
        out += list(zip(weight.split(cut), bias.split(cut) if bias is not None else [None] * len(cut)))
    return out


def gain_bias(module: nn.Module) -> tuple[Tensor, Tensor | None] | None:
    """A norm's gain and bias: those of a module whose own parameters are vectors (nn.LayerNorm, or one written by
    hand, its bias the one named bias, beta or b...), else None."""
    own = sorted(module.named_parameters(recurse=False), key=lambda kv: kv[0].startswith("b") or "bias" in kv[0])
    return (own[0][1], own[1][1] if len(own) > 1 else None) if own and all(p.dim() == 1 for _, p in own) else None


def role_grads(model: nn.Module, roles: dict[str, Tensor]) -> dict[str, Tensor]:
    """Copies of the gradients of `paper_map`'s tensors: a fused linear's matrix is a view of its parameter
    (`matrices_of`), its gradient the same view of the parameter's."""
    own, grads = {p.untyped_storage().data_ptr(): p for p in model.parameters()}, {}
    for name, role in roles.items():
        base = own[role.untyped_storage().data_ptr()]
        grad = torch.zeros_like(base) if base.grad is None else base.grad
        grads[name] = grad.as_strided(role.size(), role.stride(), role.storage_offset() - base.storage_offset()).clone()
    return grads


class Transformer(nn.Module):
    """Encoder-decoder Transformer (§3) with tied embeddings and pre-softmax projection (§3.4)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        tgt_weight = nn.Parameter(torch.empty(cfg.tgt_vocab, cfg.d_model))
        src_weight = tgt_weight if cfg.shared_vocab else nn.Parameter(torch.empty(cfg.src_vocab, cfg.d_model))
        self.src_embed = Embedding(src_weight, cfg)
        self.tgt_embed = Embedding(tgt_weight, cfg)
        self.encoder = nn.ModuleList([EncoderLayer(cfg) for _ in range(cfg.N)])
        self.decoder = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.N)])
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()
        initialize(self, cfg.init)

    @property
    def projection(self) -> nn.Parameter:
        """The pre-softmax linear transformation: the target embedding matrix (§3.4)."""
        return self.tgt_embed.weight

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src (B, S) token ids -> memory (B, S, d_model) and its padding mask (B, 1, 1, S)."""
        mask = (src != self.cfg.pad_id)[:, None, None, :]  # (B, 1, 1, S), True = a real token
        x = self.src_embed(src)
        for layer in self.encoder:
            x = layer(x, mask)
        return self.encoder_norm(x), mask

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor) -> Tensor:
        """tgt_in (B, T) shifted target ids -> logits (B, T, tgt_vocab)."""
        x = self.tgt_embed(tgt_in)
        for layer in self.decoder:
            x = layer(x, memory, src_mask)
        return F.linear(self.decoder_norm(x), self.projection)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory, mask = self.encode(src)
        return self.decode(tgt_in, memory, mask)

    def paper_map(self) -> tuple[dict[str, Tensor], dict[str, list[nn.Module]]]:
        """The one place that says which tensor plays which role of §3 (the check stage's reference
        reads the model through it alone, aiayn.check.reference): each sublayer's linears by their
        names (W_q, W_k, W_v, W_o; W_1, W_2), defined in any order, or where a sublayer lacks those
        names by order (renamed or regrouped: Q, K, V, O; the FFN's two; a fused one split by rows,
        `matrices_of`), and each layer's norms in order (`gain_bias`; the sublayers as `sublayers_of`
        finds them, by their attributes or what they hold); and the encoder's and decoder's layers,
        whose inputs and outputs locate a difference. Under a shared vocabulary "src_embed" is
        "tgt_embed"'s tensor, which is also the projection (§3.4)."""
        roles = {"src_embed": self.src_embed.weight, "tgt_embed": self.tgt_embed.weight}
        if self.cfg.positional == "learned":
            roles |= {"src_pos": self.src_embed.learned.weight, "tgt_pos": self.tgt_embed.learned.weight}
        stacks = {"encoder": (self.encoder, ["self"]), "decoder": (self.decoder, ["self", "cross"])}
        widths = [self.cfg.h * self.cfg.d_k] * 2 + [self.cfg.h * self.cfg.d_v, self.cfg.d_model]
        for stack, (layers, attentions) in stacks.items():
            names = [f"{a}.{w}" for a in attentions for w in ("W_q", "W_k", "W_v", "W_o")] + ["ffn.W_1", "ffn.W_2"]
            for i, layer in enumerate(layers):
                parts = sublayers_of(layer)
                ffn = len(parts) - 1  # the last, unsplit
                matrices = [wb for j, part in enumerate(parts) for wb in matrices_of(part, widths * (j < ffn))]
                norms = [gb for m in layer.modules() if (gb := gain_bias(m))]
                for name, (weight, bias) in [*zip(names, matrices), *((f"norm{j}", gb) for j, gb in enumerate(norms))]:
                    roles[f"{stack}.{i}.{name}.weight"] = weight
                    if bias is not None:
                        roles[f"{stack}.{i}.{name}.bias"] = bias
        for stack in ("encoder", "decoder") if self.cfg.pre_norm else ():
            weight, bias = gain_bias(getattr(self, f"{stack}_norm"))
            roles |= {f"{stack}_norm.weight": weight} | ({f"{stack}_norm.bias": bias} if bias is not None else {})
        return roles, {"encoder": list(self.encoder), "decoder": list(self.decoder)}

    def decode_step(self, tokens: Tensor, state) -> Tensor:
        """tokens (rows,) at position state.position -> logits (rows, tgt_vocab) of the next token."""
        x = self.tgt_embed(tokens[:, None], offset=state.position)  # (rows, 1, d_model)
        for i, layer in enumerate(self.decoder):
            x = layer.step(x, state, i)
        state.position += 1
        return F.linear(self.decoder_norm(x[:, 0]), self.projection)


@torch.no_grad()
def initialize(model: Transformer, init: str) -> None:
    """The initialisation named `init` (aiayn.model.hparams.INITS): the embeddings, norms and learned
    positions in module order, then each matrix of §3 in `paper_map`'s order (a fused linear's
    matrices each drawn as a linear of its own).

    Both: embeddings ~ N(0, d_model^-0.5), as the √d_model input scaling expects (tensor2tensor's
    symbol modality; fairseq's Embedding, which also zeroes the padding row); layer norms 1 and 0.
    "t2t": every linear and learned positions Xavier-uniform (uniform_unit_scaling, gain 1),
    biases (the FFN's) 0. "fairseq": W^Q, W^K, W^V Xavier-uniform at gain 1/sqrt(2) with torch's
    default biases, W^O Xavier-uniform with bias 0, the FFN's linears at torch's nn.Linear
    default, learned positions N(0, d_model^-0.5)."""
    cfg = model.cfg
    for p in {id(p): p for p in (model.src_embed.weight, model.tgt_embed.weight)}.values():
        nn.init.normal_(p, mean=0.0, std=cfg.d_model**-0.5)
        if init == "fairseq":
            p[cfg.pad_id].zero_()
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.reset_parameters()
        elif isinstance(module, nn.Embedding):  # learned positions (Table 3 row E)
            if init == "fairseq":  # its LearnedPositionalEmbedding
                nn.init.normal_(module.weight, mean=0.0, std=cfg.d_model**-0.5)
            else:  # tensor2tensor's add_positional_embedding: a variable under the default initializer
                nn.init.xavier_uniform_(module.weight)
    roles = model.paper_map()[0]
    for name, weight in ((n, w) for n, w in roles.items() if ".W_" in n and n.endswith(".weight")):
        bias, kind = roles.get(name.replace(".weight", ".bias")), name.split(".")[-2]
        if init == "fairseq" and kind in ("W_q", "W_k", "W_v", "W_1", "W_2"):  # nn.Linear's own draw
            nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
            if bias is not None:
                nn.init.uniform_(bias, -(weight.size(1) ** -0.5), weight.size(1) ** -0.5)
        if init == "t2t" or kind in ("W_q", "W_k", "W_v", "W_o"):
            nn.init.xavier_uniform_(weight, gain=2**-0.5 if init == "fairseq" and kind != "W_o" else 1.0)
            if bias is not None and (init == "t2t" or kind == "W_o"):
                nn.init.zeros_(bias)


def count_parameters(model: nn.Module) -> int:
    """Distinct trainable parameters (a tied matrix counts once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def build(cfg: ModelConfig, device: str | torch.device | None = None) -> Transformer:
    with torch.device(device or "cpu"):
        return Transformer(cfg)


@torch.no_grad()
def recorded(model: Transformer, layers: list[MultiHeadAttention], *sentence: list[int]) -> list[Tensor]:
    """The attention weights of `layers` (h, T, S) each, as the model runs over one sentence: its
    encoder over the source, or the whole model over the source and the target's input."""
    for attn in layers:
        attn.recorded = []
    try:
        (model.encode if len(sentence) == 1 else model)(*(torch.tensor([tokens]) for tokens in sentence))
        return [attn.recorded[0][0] for attn in layers]
    finally:
        for attn in layers:
            attn.recorded = None


def encoder_attention(model: Transformer, tokens: list[int]) -> Tensor:
    """The last encoder layer's self-attention weights over one source sentence (its token ids, EOS
    included): (h, S, S), each row a distribution over the positions attended."""
    return recorded(model, [model.encoder[-1].self_attn], tokens)[0]


def cross_attention(model: Transformer, src: list[int], tgt_in: list[int]) -> list[Tensor]:
    """Every decoder layer's encoder-decoder attention weights for one sentence pair, the target
    fed as in training (teacher forcing; `tgt_in` starts with BOS, `src` ends with EOS): a list of
    (h, T, S), one per layer, row i the source distribution read to predict target token i."""
    return recorded(model, [layer.cross_attn for layer in model.decoder], src, tgt_in)
