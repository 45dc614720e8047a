"""The check stage (aiayn.check): its checks pass on the code as it is, under every setting that
changes what they compare; they stop bugs written into the source as a person writes them, in
process (the edited module executed in place of the real one, `edited`), each with one line that
names where the run departs and, where a known mistake reproduces it, the mistake; harmless
rewrites pass. A few runs go through the command in a subprocess, one with a source edit, so that
the in-process edits stand for what a user's edited clone does."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import toy
from conftest import ROOT

from aiayn.check import check as job
from aiayn.check import reference
from aiayn.errors import UserError
from aiayn.runtime import records

NAMES = [spec.name for spec in job.CHECKS]
T, OBJ, TRAIN, BATCH = "model/transformer.py", "training/objective.py", "training/train.py", "training/batching.py"


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    folder = tmp_path_factory.mktemp("check")
    toy.corpus(folder / "train.bin", n=40)
    return folder


def check(folder: Path, **model) -> str:
    """`check_job` of the two-layer toy experiment in-process: "passed", or the error's one line."""
    settings = toy.settings()
    settings["model"] = {**settings["model"], "N": 2, **model.pop("model", {})}
    settings["train"].update(model.pop("train", {}))
    (folder / "experiment.json").write_text(json.dumps(settings))
    (folder / "check.json").unlink(missing_ok=True)
    try:
        job.check_job(folder / "experiment.json", folder / "train.bin", folder / "check.json", log=lambda m: None)
    except UserError as error:
        assert "\n" not in str(error) and not (folder / "check.json").exists()
        return str(error)
    return "passed"


def edited(monkeypatch, file: str, old: str, new: str, *more: str) -> None:
    """Run aiayn's module `file` with `old` replaced by `new` (and each further old, new pair of `more`), as a
    person edits the source: the edited text executed as the module, its names set on it and on every
    aiayn module that imported them."""
    module = importlib.import_module("aiayn." + file.removesuffix(".py").replace("/", "."))
    source = Path(module.__file__).read_text()
    for a, b in [(old, new), *zip(more[::2], more[1::2])]:
        assert source.count(a) == 1, f"{file}: the text to change is not there once: {a}"
        source = source.replace(a, b)
    namespace = dict(vars(module))
    exec(compile(source, module.__file__, "exec"), namespace)
    was = {id(v): k for k, v in vars(module).items() if not k.startswith("__") and callable(v)}
    for name, value in namespace.items():
        if not name.startswith("__") and vars(module).get(name) is not value:
            monkeypatch.setattr(module, name, value, raising=False)  # (a name the edit adds too)
    for other in [m for n, m in list(sys.modules.items()) if n.startswith("aiayn") and m is not module]:
        for name, value in list(vars(other).items()):
            if id(value) in was and namespace.get(was[id(value)]) is not value:
                monkeypatch.setattr(other, name, namespace[was[id(value)]])


@pytest.mark.parametrize(
    "changes",
    [{}, {"model": {"init": "fairseq"}}, {"model": {"pre_norm": True}}, {"model": {"positional": "learned"}},
     {"model": {"h": 1, "d_k": 32, "d_v": 32}}, {"model": {"d_model": 64, "h": 8, "d_k": 4, "d_v": 16}},
     {"model": {"P_drop_attn": 0.2}}, {"model": {"P_drop": 0.0}}, {"train": {"clip_norm": 0.5}},
     {"train": {"eps_ls": 0.0}}, {"train": {"eps_ls": 0.999}}, {"train": {"adam_beta2": 0.0, "adam_beta1": 0.0}},
     {"train": {"lr_scale": 100.0}}, {"model": {"P_drop": 0.99}}, {"train": {"lr_scale": 1e12}}],
    ids=["base", "fairseq", "pre_norm", "learned", "one_head", "small_dk", "attention_dropout", "no_dropout", "clip",
         "no_smoothing", "smoothing_0.999", "betas_0", "lr_x100", "P_drop_0.99", "lr_x1e12_not_finite"],
)  # fmt: skip
def test_every_check_passes_on_the_code_as_it_is(experiment, changes):
    """A setting the schema admits is the setting, not a bug: the reference takes it."""
    assert check(experiment, **changes) == "passed"
    record = records.read(experiment / "check.json", "check")
    assert [c["name"] for c in record["checks"]] == NAMES and all(c["passed"] for c in record["checks"])


@pytest.mark.filterwarnings("error")
def test_a_weight_of_one_element_is_no_spread_to_measure(experiment):
    """d_ff 1 (the schema's minimum): a bias of one element, whose spread is not measured (no warning)."""
    assert check(experiment, model={"d_ff": 1}) == "passed"


def test_learned_positions_too_few_for_the_corpus_name_the_setting_not_the_code(experiment):
    line = check(experiment, model={"positional": "learned", "max_positions": 4})
    assert "model.max_positions: 4 learned positions, but" in line and "raise max_positions" in line, line


def test_unshared_vocabularies_pass(tmp_path):
    settings = toy.settings()
    settings["model"]["N"], settings["vocab"]["shared"] = 2, False
    (tmp_path / "experiment.json").write_text(json.dumps(settings))
    toy.corpus(tmp_path / "train.bin", n=40)
    assert job.check_job(tmp_path / "experiment.json", tmp_path / "train.bin", tmp_path / "c.json", log=print) == 0


# heads packed strided: head i takes every h-th column of Q, K, V (W's rows in another order)
STRIDED = ("return x.view(B, T, self.h, width).transpose(1, 2)", "return x.view(B, T, width, self.h).permute(0, 3, 1, 2)",
           "q = attn.W_q(y).view(rows // g, g, attn.h, attn.d_k).transpose(1, 2)",
           "q = attn.W_q(y).view(rows // g, g, attn.d_k, attn.h).permute(0, 3, 1, 2)")  # fmt: skip
# bugs written into the source: (file, the text as it is, the text with the bug, what the one line must say)
BUGS = {
    "pairs misaligned in collate": (BATCH, "rows, cols, toks, tgt_len = _gather(corpus.tgt_tokens, corpus.tgt_offsets, indices)",
        "rows, cols, toks, tgt_len = _gather(corpus.tgt_tokens, corpus.tgt_offsets, np.roll(indices, 1))",
        ["check data failed", "decoder input is pair", "(pairs misaligned)"]),
    "zero_grad removed": (TRAIN, "self.optimizer.zero_grad(set_to_none=True)", "pass",
        ["check training failed: update 2: the run departs from the paper's in the gradient of the parameters", "gradients not zeroed between updates"]),
    "dropout after the layer norm": (T, "return self.norm(x + self.dropout(sublayer(x)))",
        "return self.dropout(self.norm(x + sublayer(x)))",
        ["update 1: the run departs from the paper's in the logits (training mode)", "encoder layer 1", "dropout after the layer norm"]),
    "collate cuts every sentence to 8 pieces": (BATCH, "lengths = offsets[indices + 1] - starts",
        "lengths = np.minimum(offsets[indices + 1] - starts, 8)", ["check data failed", "where the corpus has"]),
    "the schedule stepped once per micro-batch": (TRAIN, "            total += loss.detach()\n",
        "            total += loss.detach()\n            self.scheduler.step()\n",
        ["the optimizer's step", "stepped at the rate", "(x 3)"]),
    "incremental decoding at position 0": (T, "x = self.tgt_embed(tokens[:, None], offset=state.position)",
        "x = self.tgt_embed(tokens[:, None], offset=0)",
        ["check decoding failed", "where the full forward pass gives it"]),
    "heads merged without the transpose": (T, "return self.W_o(out.transpose(1, 2).reshape(B, T, self.h * self.d_v))",
        "return self.W_o(out.reshape(B, T, self.h * self.d_v))", ["encoder layer 1", "heads merged by a view"]),
    "logits scaled by sqrt(d_model)": (T, "return F.linear(self.decoder_norm(x), self.projection)",
        "return F.linear(self.decoder_norm(x), self.projection) * math.sqrt(self.cfg.d_model)",
        ["the projection", "the logits scaled by sqrt(d_model)"]),
    "a decoder input that starts with EOS": (BATCH, "tgt_in[:, 0] = BOS", "tgt_in[:, 0] = EOS",
        ["check data failed", "EOS in place of BOS"]),
    "the target passed as the decoder input": (TRAIN, "logits = module(batch.src, batch.tgt_in)",
        "logits = module(batch.src, batch.tgt_out)", ["check data failed", "the target itself, not shifted right"]),
    "eps_ls lost": (TRAIN, 'loss = label_smoothed_loss(logits, batch.tgt_out, self.tr["eps_ls"])',
        "loss = label_smoothed_loss(logits, batch.tgt_out, 0.0)", ["the gradient the loss gives the logits", "no smoothing"]),
    "torch's smoothing convention": (OBJ, "smoothing = eps_ls * V / (V - 1) if V > 1 else 0.0", "smoothing = eps_ls",
        ["the gradient the loss gives the logits", "torch's label_smoothing=eps_ls convention"]),
    "positions added twice": (T, "x = F.embedding(tokens, self.weight) * self.scale  #",
        "x = F.embedding(tokens, self.weight) * self.scale + self.positions(tokens.size(1), offset, tokens.device)  #",
        ["the source embedding", "the positional encoding added twice"]),
    "no causal mask in training": (T, "self.self_attn(y, y, causal=True)", "self.self_attn(y, y, causal=not self.training)",
        ["decoder layer 1", "no causal mask: it reads the future, at decoder layer 1's self-attention"]),
    "no padding mask in the encoder-decoder attention": (T, "self.cross_attn(y, memory, src_mask)",
        "self.cross_attn(y, memory)", ["no padding mask", "encoder-decoder attention"]),
    "attention scaled twice": (T, "q = self.split(self.W_q(x), self.d_k)", "q = self.split(self.W_q(x), self.d_k) * self.scale",
        ["attention scaled by 1/d_k (1/sqrt(d_k) twice)"]),
    "the memory detached": (T, "return self.encoder_norm(x), mask", "return self.encoder_norm(x).detach(), mask",
        ["the gradient of the parameters", "no gradient reaches encoder.0"]),
    "Adam's betas swapped": (OBJ, 'betas=(float(tr["adam_beta1"]), float(tr["adam_beta2"]))', 'betas=(tr["adam_beta2"], tr["adam_beta1"])',
        ["update 2: the run departs from the paper's in the optimizer's step", "beta1 and beta2 swapped"]),
    "Adam's eps hard-coded": (OBJ, 'eps=float(tr["adam_eps"])', "eps=1e-8", ["the optimizer's step", "Adam's eps at torch's default, 1e-8"]),
    "pre-LN in one layer": (T, "        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(2)])",
        "        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(2)])\n        self.sub[0].pre_norm = True",
        ["pre-LN", "at encoder layer 1's self-attention"]),
    "dropout left on at inference": (T, "return self.dropout(x + pos.to(x.dtype))",
        "return F.dropout(x + pos.to(x.dtype), self.dropout.p)", ["the dev pass (evaluate)", "(no dropout)"]),
    "padding counted in the loss": (OBJ, "ignore_index=PAD, label_smoothing=smoothing", "label_smoothing=smoothing",
        ["padding targets counted in the loss"]),
    "GELU in the feed-forward network": (T, "return self.W_2(F.relu(self.W_1(x)))", "return self.W_2(F.gelu(self.W_1(x)))",
        ["GELU in place of ReLU", "encoder layer 1's feed-forward network"]),
    "no residual dropout": (T, "        return self.norm(x + self.dropout(sublayer(x)))", "        return self.norm(x + sublayer(x))",
        ["the dropout (training mode)", "the model drew 2 residual"]),
    "a final layer norm under post-LN": (T, "self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()",
        "self.decoder_norm = nn.LayerNorm(cfg.d_model)", ["parameters outside §3's map (§3 has none such, or not in this shape): decoder_norm.weight"]),
    "the residual dropped around the encoder-decoder attention": (T,
        "        x = self.sub[1](x, lambda y: self.cross_attn(y, memory, src_mask))\n        return self.sub[2](x, self.ffn)\n\n",
        "        x = self.sub[1].norm(self.sub[1].dropout(self.cross_attn(x, memory, src_mask)))\n"
        "        return self.sub[2](x, self.ffn)\n\n", ["the residual connection dropped, at decoder layer 1's encoder-decoder"]),
    "every encoder layer reads the embedding": (T, "        for layer in self.encoder:\n            x = layer(x, mask)",
        "        e = x\n        for layer in self.encoder:\n            x = layer(e, mask)",
        ["the input of encoder layer 2", "every layer fed the embedding"]),
    "a schedule of step^-0.6": ("runtime/schedule.py", "min(step**-0.5, step * warmup_steps**-1.5)",
        "min(step**-0.6, step * warmup_steps**-1.6)", ["stepped at the rate"]),
    "sinusoids of base 1000": (T, "torch.pow(10000.0,", "torch.pow(1000.0,",
        ["the source embedding", "none of the known mistakes reproduces it"]),
    "beam search's cache not reordered": ("model/beam.py",
        "        self.k = [k.index_select(0, index) for k in self.k]\n        self.v = [v.index_select(0, index) for v in self.v]\n",
        "", ["check decoding failed", "raised RuntimeError at model/beam.py"]),  # rows of finished sentences left
    "a beam reordered by its rank, not its hypothesis": ("model/beam.py", "* k + alive_beam)[keep]", "* k + pick)[keep]",
        ["check decoding failed", "where the full forward pass gives it"]),
    "the live histories gathered by the top k's beams, an ended one's among them": ("model/beam.py",
        "history.gather(1, alive_beam.unsqueeze(-1)", "history.gather(1, top_beam[:, :k].unsqueeze(-1)",
        ["check decoding failed"]),
    "averaging divides by one checkpoint more": ("training/average.py", "v / len(paths) for k", "v / (len(paths) + 1) for k",
        ["check averaging failed", "its mean of steps 4 and 6 is"]),
    "averaging takes a stop signal's checkpoint": ("training/average.py",
        "grid = [path for step, path in found if ckpt.on_grid(step, interval, final)]", "grid = [p for _, p in found]",
        ["check averaging failed", "it averages steps [6, 7] of 1-7"]),
    "averaging takes the newest checkpoint though off the grid": ("training/average.py",
        "grid = [path for step, path in found if ckpt.on_grid(step, interval, final)]",
        "grid = [path for step, path in found if ckpt.on_grid(step, interval, final) or step == found[0][0]]",
        ["check averaging failed", "it averages steps [6, 7] of 1-7"]),
    "fairseq's W^O bias left at torch's default": (T, "if bias is not None and (init == \"t2t\" or kind == \"W_o\"):",
        "if bias is not None and init == \"t2t\":", ["check initialisation failed", "W_o.bias has mean"]),
    "the FFN without its biases": (T, "        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff)\n        self.W_2 = nn.Linear("
        "cfg.d_ff, cfg.d_model)\n", "        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)\n        self.W_2 = "
        "nn.Linear(cfg.d_ff, cfg.d_model, bias=False)\n", ["the set of parameters", "no FFN biases, where §3.3 has"]),
    "the loss summed, not averaged over the update's targets": (TRAIN, "loss * (self.env.world_size / tgt_tokens)",
        "loss * self.env.world_size", ["its scale: the update's gradient is"]),
    "the last micro-batch of each epoch left out": (BATCH, "    batches = np.split(order, cuts)\n",
        "    batches = np.split(order, cuts)[:-1]\n", ["check data failed", "leaves out"]),
    "attention dropout on the attention's output": (T, "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, scale=self.scale)",
        "out = F.dropout(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=self.scale), p)", ["the dropout (training mode)"]),
    "the dev evaluation leaves the model in eval mode": (TRAIN, "        self.model.train()\n        nll_per =",
        "        nll_per =", ["update 2", "the dropout (training mode)"]),
    "translate leaves the model in training mode": ("evaluation/translate.py", "    model.eval()\n    out: list",
        "    out: list", ["check decoding failed"]),
    "translate's hypotheses kept in length order": ("evaluation/translate.py", "for i, hyps in zip(batch, results)",
        "for i, hyps in zip(sorted(batch), results)", ["check decoding failed", "handed to another"]),
    "embeddings drawn N(0, 1)": (T, "nn.init.normal_(p, mean=0.0, std=cfg.d_model**-0.5)", "nn.init.normal_(p, mean=0.0, std=1.0)",
        ["check initialisation failed", "src_embed has std"]),
    "the optimizer stepped at each micro-batch": (TRAIN, "            total += loss.detach()\n",
        "            total += loss.detach()\n            if j < len(mine) - 1:\n                self.optimizer.step()\n",
        ["the number of optimizer steps", "2 steps in an update of 2 micro-batches"]),
    "dropout reseeded alike at each micro-batch": (TRAIN, "seed_dropout(self.tr[\"seed\"], first + j, self.env.device)",
        "seed_dropout(self.tr[\"seed\"], 0, self.env.device)", ["the dropout (training mode)", "drew the dropout masks of"]),
    "the dev pass in training mode": (TRAIN, "        self.model.eval()\n        dev =", "        dev =",
        ["update 1: the run departs from the paper's in the dev pass (evaluate)", "(no dropout) gives"]),
    "the dev NLL label-smoothed": (TRAIN, "nll = nll + label_smoothed_loss(logits, batch.tgt_out, 0.0)",
        "nll = nll + label_smoothed_loss(logits, batch.tgt_out, self.tr[\"eps_ls\"])", ["the dev pass (evaluate)", "its NLL"]),
    "every sentence's length limit from the longest in its batch": ("evaluation/translate.py",
        "limits = [max_steps(len(s), a, b, cap) for s in src]", "limits = [max_steps(S - 1, a, b, cap) for s in src]",
        ["check decoding failed", "over its limit"]),
    "the loss trained towards the decoder input": (TRAIN, 'loss = label_smoothed_loss(logits, batch.tgt_out, self.tr["eps_ls"])',
        'loss = label_smoothed_loss(logits, batch.tgt_in, self.tr["eps_ls"])',
        ["check data failed", "trained target is the decoder input, not the target"]),
    "the targets of the batch rotated a row": (BATCH, "    tgt_out[every, tgt_len] = EOS\n",
        "    tgt_out[every, tgt_len] = EOS\n    tgt_out = tgt_out[np.roll(every, 1)]\n",
        ["check data failed", "trained target is pair", "(pairs misaligned)"]),
    "attention dropout, and the padding mask one key short": (T, "mask = (src != self.cfg.pad_id)[:, None, None, :]",
        "mask = (src != self.cfg.pad_id)[:, None, None, :-1]", ["the experiment's code raised RuntimeError at model/transformer.py"]),
    "every micro-batch of an update its first": (BATCH, "return [self.micro_batch(g) for g in range(first, first + self.per_update)]",
        "return [self.micro_batch(first) for g in range(first, first + self.per_update)]",
        ["check data failed", "fed again before the epoch's other pairs were"]),
    "translate's last batch left out": ("evaluation/translate.py", "    if current:\n        batches.append(current)\n    return batches",
        "    return batches", ["check decoding failed", "what the experiment's code returned cannot be read"]),
    "gradients clipped when clip_norm is 0": (TRAIN, 'if self.tr["clip_norm"] > 0:', 'if self.tr["clip_norm"] >= 0:',
        ["the gradient of the parameters", "every gradient is 0 at the step (clipped to norm 0"]),
    "heads split strided in training, not in the decoding step": (T, STRIDED[0], STRIDED[1],
        ["check decoding failed", "where the full forward pass gives it"]),
    "the encoder's padding mask inverted": (T, "mask = (src != self.cfg.pad_id)[:, None, None, :]",
        "mask = (src == self.cfg.pad_id)[:, None, None, :]", ["check training failed: update 1: the "]),
}  # fmt: skip
# (the inverted mask's line: "the padding mask inverted" where torch's kernel gives a query with no key 0,
# "not finite" at the weights as drawn where an older torch gives it NaN, as the floors' torch does)
HARMLESS = {
    "the summed gradient normalised after the micro-batches (fairseq's way)": (TRAIN,
        "            self.scaler.scale(loss * (self.env.world_size / tgt_tokens)).backward()\n            total += loss.detach()\n",
        "            self.scaler.scale(loss).backward()\n            total += loss.detach()\n"
        "        for p in self.model.parameters():\n            if p.grad is not None:\n"
        "                p.grad.mul_(self.env.world_size / tgt_tokens)\n"),
    "the gradients cleared after the step, not before the micro-batches": (TRAIN,
        "        self.optimizer.zero_grad(set_to_none=True)\n        total", "        total",
        "            self.scheduler.step()\n        return total,",
        "            self.scheduler.step()\n        self.optimizer.zero_grad(set_to_none=True)\n        return total,"),
    "heads packed strided (every h-th column), in training and decoding alike": (T, *STRIDED),
    "the FFN's W_2 defined first": (T, "        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff)\n",
        "        self.W_2 = nn.Linear(cfg.d_ff, cfg.d_model)\n        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff)\n"),
    "the attention's W_o defined first": (T,
        "        self.W_q = nn.Linear(cfg.d_model, cfg.h * cfg.d_k, bias=bias)\n",
        "        self.W_o = nn.Linear(cfg.h * cfg.d_v, cfg.d_model, bias=bias)\n"
        "        self.W_q = nn.Linear(cfg.d_model, cfg.h * cfg.d_k, bias=bias)\n"),
    "the decoder input padded with EOS": (BATCH, "    tgt_in = np.full((B, int(tgt_len.max()) + 1), PAD, dtype=np.int64)\n"
        "    tgt_out = np.full_like(tgt_in, PAD)", "    tgt_out = np.full((B, int(tgt_len.max()) + 1), PAD, dtype=np.int64)\n"
        "    tgt_in = np.full_like(tgt_out, EOS)"),
    "the feed-forward network regrouped into nn.Sequential": (T,
        "        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff)\n        self.W_2 = nn.Linear(cfg.d_ff, cfg.d_model)\n\n"
        "    def forward(self, x: Tensor) -> Tensor:\n        return self.W_2(F.relu(self.W_1(x)))",
        "        self.net = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.ReLU(), nn.Linear(cfg.d_ff, cfg.d_model))\n\n"
        "    def forward(self, x: Tensor) -> Tensor:\n        return self.net(x)"),
    "the FFN as two convolutions of kernel size 1 (§3.3's other wording)": (T,
        "        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff)\n        self.W_2 = nn.Linear(cfg.d_ff, cfg.d_model)\n\n"
        "    def forward(self, x: Tensor) -> Tensor:\n        return self.W_2(F.relu(self.W_1(x)))",
        "        self.W_1 = nn.Conv1d(cfg.d_model, cfg.d_ff, 1)\n        self.W_2 = nn.Conv1d(cfg.d_ff, cfg.d_model, 1)\n\n"
        "    def forward(self, x: Tensor) -> Tensor:\n        return self.W_2(F.relu(self.W_1(x.transpose(1, 2)))).transpose(1, 2)"),
    "the decoder layer's FFN renamed feed_forward": (T,
        "        self.ffn = FeedForward(cfg)\n        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(3)])",
        "        self.feed_forward = FeedForward(cfg)\n        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in "
        "range(3)])", "memory, src_mask))\n        return self.sub[2](x, self.ffn)",
        "memory, src_mask))\n        return self.sub[2](x, self.feed_forward)", "        return self.sub[2](x, self.ffn)",
        "        return self.sub[2](x, self.feed_forward)"),
    "positions counted from 1 in training and decoding alike": (T,
        "return sinusoidal_positions(length, self.d_model, offset).to(device)",
        "return sinusoidal_positions(length, self.d_model, offset + 1).to(device)"),
    "attention written out": (T,
        "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, scale=self.scale)",
        "out = F.dropout(attention_weights(q, k, mask, causal, scale=self.scale), p) @ v"),
    "the sinusoids by exp and log": (T,
        "angle = pos / torch.pow(10000.0, torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)",
        "angle = pos * torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))"),
    "the heads split by reshape and permute": (T, "return x.view(B, T, self.h, width).transpose(1, 2)  #",
        "return x.reshape(B, T, self.h, width).permute(0, 2, 1, 3)  #"),
    "the sinusoids in halves (tensor2tensor's layout)": (T, "pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)",
        "pe[:, : d_model // 2] = torch.sin(angle)\n    pe[:, d_model // 2 :] = torch.cos(angle)"),
    "the loss written out, with t2t's entropy constant": (OBJ,
        '        return F.cross_entropy(flat, target, ignore_index=PAD, label_smoothing=smoothing, reduction="sum")\n',
        "        logp, kept = F.log_softmax(flat, dim=-1), target != PAD\n"
        "        q = torch.full_like(logp, eps_ls / (V - 1)).scatter_(1, target.clamp(min=0)[:, None], 1 - eps_ls)\n"
        "        return ((-(q * logp).sum(-1) + (q * q.clamp(min=1e-30).log()).sum(-1)) * kept).sum()\n"),
    "W^Q, W^K and W^V fused into one linear, each read as its rows": (T,
        "        self.W_q = nn.Linear(cfg.d_model, cfg.h * cfg.d_k, bias=bias)\n"
        "        self.W_k = nn.Linear(cfg.d_model, cfg.h * cfg.d_k, bias=bias)\n"
        "        self.W_v = nn.Linear(cfg.d_model, cfg.h * cfg.d_v, bias=bias)\n",
        "        self.W_qkv = nn.Linear(cfg.d_model, cfg.h * (2 * cfg.d_k + cfg.d_v), bias=bias)\n"
        "        rows = [cfg.h * cfg.d_k, cfg.h * cfg.d_k, cfg.h * cfg.d_v]\n"
        "        self.W_q, self.W_k, self.W_v = (lambda x, j=j: F.linear(x, self.W_qkv.weight.split(rows)[j],\n"
        "            None if self.W_qkv.bias is None else self.W_qkv.bias.split(rows)[j]) for j in range(3))\n"),
    "the encoder's self-attention as torch's nn.MultiheadAttention": (T,
        "        self.self_attn = MultiHeadAttention(cfg)\n        self.ffn = FeedForward(cfg)\n"
        "        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(2)])",
        "        self.self_attn = nn.MultiheadAttention(cfg.d_model, cfg.h, cfg.P_drop_attn, cfg.attention_bias, "
        "batch_first=True)\n        self.ffn = FeedForward(cfg)\n"
        "        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(2)])",
        "lambda y: self.self_attn(y, y, src_mask))",
        "lambda y: self.self_attn(y, y, y, key_padding_mask=~src_mask[:, 0, 0], need_weights=False)[0])"),
    "the layer norm written by hand, its gain and bias a_2 and b_2 (the Annotated Transformer's)": (T,
        "class SublayerConnection(nn.Module):",
        "class Norm(nn.Module):\n    def __init__(self, d: int):\n        super().__init__()\n"
        "        self.a_2, self.b_2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))\n\n"
        "    def forward(self, x):\n        mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)\n"
        "        return self.a_2 * (x - mean) / torch.sqrt(var + 1e-5) + self.b_2\n\n\n"
        "class SublayerConnection(nn.Module):",
        "        self.norm = nn.LayerNorm(cfg.d_model)\n", "        self.norm = Norm(cfg.d_model)\n"),
    "a sublayer list renamed": (T, "self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(3)])",
        "self.connections = nn.ModuleList([SublayerConnection(cfg) for _ in range(3)])\n        self.sub = self.connections"),
}  # fmt: skip


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_bug_written_into_the_source_stops_the_experiment_with_one_line(bug, experiment, monkeypatch):
    file, old, new, said = BUGS[bug]
    edited(monkeypatch, file, old, new)
    line = check(experiment, **({"model": {"P_drop_attn": 0.1}} if "attention dropout" in bug else
                                {"model": {"init": "fairseq"}} if "fairseq" in bug else {}))  # fmt: skip
    assert line.startswith("experiment toy: check ") and all(s in line for s in said), line


def test_torchs_smoothing_is_named_where_it_moves_the_gradient_less_than_the_tolerance(experiment, monkeypatch):
    """At eps_ls 0.01 here (0.1 at the paper's 37k pieces), torch's convention moves the loss's gradient by less than
    1e-3; it is named all the same: it fits 10 x closer than the paper's target."""
    edited(monkeypatch, *BUGS["torch's smoothing convention"][:3])
    line = check(experiment, train={"eps_ls": 0.01})
    assert "torch's label_smoothing=eps_ls convention" in line, line


@pytest.mark.parametrize("rewrite", sorted(HARMLESS))
def test_a_harmless_rewrite_passes(rewrite, experiment, monkeypatch):
    edited(monkeypatch, *HARMLESS[rewrite])
    assert check(experiment) == "passed"


PLAN_BUGS = {  # the plan over a corpus of sides of unequal lengths, many micro-batches an epoch
    "the budget counted on the source side alone": ("real_s + s > budget or real_t + t > budget or longest",
        "real_s + s > budget or longest", "target tokens"),
    "the micro-batches not shuffled": ("return [batches[j] for j in rng.permutation(len(batches))]",
        "return list(batches)", "in epoch 1's order"),
    "every epoch in one order": ("rng = np.random.default_rng([self.seed, e])",
        "rng = np.random.default_rng([self.seed, 0])", "in epoch 1's order"),
}  # fmt: skip


@pytest.mark.parametrize("bug", sorted(PLAN_BUGS))
def test_a_plan_that_is_no_epoch_of_the_corpus_at_its_budget_is_said(bug, tmp_path, monkeypatch):
    from aiayn.check.data import coverage
    from aiayn.data import binary
    from aiayn.training import batching

    rng = np.random.default_rng(0)
    sides = [[rng.integers(4, 50, size=rng.integers(1, 30)) for _ in range(2000)] for _ in "st"]
    meta = {"src_vocab": 50, "tgt_vocab": 50}
    binary.write(tmp_path / "c.bin", *toy.from_sequences(*sides), dtype=np.uint16, meta=meta)
    plan = lambda: batching.Batcher(binary.read(tmp_path / "c.bin"), budget=300, seed=1, per_update=2, max_padded=450)  # noqa: E731
    assert coverage(plan()) is None
    old, new, said = PLAN_BUGS[bug]
    edited(monkeypatch, BATCH, old, new)
    assert said in (coverage(plan()) or "")


def test_a_cause_is_named_only_where_its_reproduction_matches(experiment, monkeypatch):
    """A mistake of no known form is placed and measured, and no cause is guessed."""
    edited(monkeypatch, T, "return self.W_2(F.relu(self.W_1(x)))", "return self.W_2(F.relu(self.W_1(x)) ** 1.5)")
    line = check(experiment)
    assert "encoder layer 1 by" in line and "none of the known mistakes reproduces it" in line, line


# -- the reference against hand computations and torch --------------------------------------------------
def test_the_references_adam_is_torchs_and_its_rate_and_target_are_the_papers():
    torch.manual_seed(0)
    x, grads = torch.randn(5), [torch.randn(5) for _ in range(3)]
    p = x.clone().requires_grad_(True)
    adam = torch.optim.Adam([p], lr=0.1, betas=(0.9, 0.98), eps=1e-9)
    for g in grads:  # the reference's step is the last one, its moments replayed over the gradients before
        before = p.detach().clone()
        p.grad = g.clone()
        adam.step()
    mine = reference.adam_step(before, grads, [0.1] * 3, betas=(0.9, 0.98), eps=1e-9)
    assert torch.allclose(mine.float(), p.detach(), atol=1e-6)
    assert reference.paper_rate(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)
    q = reference.smoothed_target(torch.tensor([[5, 0]]), 10, 0.1, pad=0)
    assert q[0, 0].sum() == pytest.approx(1) and q[0, 0, 5] == pytest.approx(0.9) and q[0, 1].sum() == 0
    pe = reference.sinusoids(3, 4)
    assert pe[2, 1] == pytest.approx(torch.cos(torch.tensor(2.0)).item()) and pe[2, 2] == pytest.approx(
        torch.sin(torch.tensor(2 / 100.0)).item())  # fmt: skip


def test_the_registry_is_the_docs_table_and_the_records_order():
    """docs/falls-short.md's table of the checks has one row per check of the registry, in its order,
    with its section, what it compares and its tolerance."""
    text = (ROOT / "docs/falls-short.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \| (.+?) \| (.+?) \|$", text, re.M)
    assert [r[0] for r in rows] == NAMES
    for spec, (_, section, compares, tolerance) in zip(job.CHECKS, rows):
        assert (section, compares, tolerance) == (spec.section, spec.compares, spec.tolerance), spec.name


# -- the command, in a subprocess -----------------------------------------------------------------------
def command(tmp_path: Path, *extra: str, package: Path | None = None) -> subprocess.CompletedProcess:
    settings = toy.settings()
    settings["model"]["N"] = 2
    (tmp_path / "experiment.json").write_text(json.dumps(settings))
    toy.corpus(tmp_path / "train.bin", n=40)
    env = {**toy.env_for_subprocess(), **({"PYTHONPATH": str(package.parent)} if package else {})}
    cmd = [sys.executable, "-m", "aiayn", "check", "--settings", str(tmp_path / "experiment.json"),
           "--train", str(tmp_path / "train.bin"), "--out", str(tmp_path / "check.json"), *extra]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


def package_edited(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of the package with `old` replaced by `new` in `file`, as a person edits their clone."""
    package = tmp_path / "src" / "aiayn"
    shutil.copytree(ROOT / "src" / "aiayn", package, ignore=shutil.ignore_patterns("__pycache__"))
    assert old in (package / file).read_text()
    (package / file).write_text((package / file).read_text().replace(old, new))
    return package


def test_the_command_writes_every_figure_and_says_each_check_once(tmp_path):
    """As typed, then as the rule runs it (lines in the log) on a clone with a harmless rewrite in its
    source: the rewrite passes the command as it passes in-process (test_a_harmless_rewrite_passes)."""
    run = command(tmp_path)
    assert run.returncode == 0 and not run.stderr, run.stderr
    assert run.stdout.count(" ok: ") == len(NAMES) and f"all {len(NAMES)} checks passed" in run.stdout
    assert [c["name"] for c in records.read(tmp_path / "check.json", "check")["checks"]] == NAMES
    harmless = package_edited(tmp_path, *HARMLESS["the feed-forward network regrouped into nn.Sequential"])
    run = command(tmp_path, "--log-to", str(tmp_path / "check.log"), package=harmless)
    assert run.returncode == 0 and " ok: " not in run.stdout and f"all {len(NAMES)} checks passed" in run.stdout
    assert (tmp_path / "check.log").read_text().count(" ok: ") == len(NAMES)


def test_a_source_edited_in_a_clone_is_what_the_in_process_edit_shows(tmp_path):
    """The same edit, in a copy of the package run as the command: the one line on stderr, exit 2,
    nothing written (a harmless rewrite in a clone: test_the_command_writes_every_figure_and_says_each_check_once)."""
    file, old, new, *said = BUGS["the target passed as the decoder input"]
    run = command(tmp_path, package=package_edited(tmp_path, file, old, new))
    errors = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(errors) == 1 and all(s in errors[0] for s in said[0]), run.stderr[-2000:]
    assert not (tmp_path / "check.json").exists()


# -- which code a check measured -----------------------------------------------------------------------
def test_the_checked_code_is_the_code_that_builds_trains_and_decodes_a_model(tmp_path):
    """check.json records `checked_code()`: it changes with the model, the trainer, the loss, the
    schedule, the decoder's search and the checks, and not with the report or the commands."""
    from aiayn.study.code import PACKAGE, checked_code

    copy = tmp_path / "aiayn"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = checked_code(copy)
    assert before == checked_code() and before.startswith("code-sha256:")
    for name in ("model/transformer.py", "training/objective.py", "training/train.py", "runtime/schedule.py",
                 "evaluation/translate.py", "check/reference.py"):  # fmt: skip
        path = copy / name
        original = path.read_bytes()
        path.write_bytes(original + b"\n# changed\n")
        assert checked_code(copy) != before, name
        path.write_bytes(original)
    for name in ("report/tables.py", "cli.py", "evaluation/score.py"):
        (copy / name).write_bytes((copy / name).read_bytes() + b"\n# changed\n")
    assert checked_code(copy) == before


def test_a_training_takes_its_check_as_ancient_only_once_it_has_trained(tmp_path):
    """Before its final checkpoint exists, or with train (or that checkpoint) forced, the edge is a
    plain one, so that Snakemake plans the training behind a re-run check (snakemake#4166); the
    composed step, the demo's DAG after a code change, is tests/test_e2e.py's."""
    from aiayn.study.code import check_is_ancient

    final = tmp_path / "base" / "checkpoints" / "last.pt"
    assert not check_is_ancient(final)
    final.parent.mkdir(parents=True)
    final.write_bytes(b"model")
    assert check_is_ancient(final) and check_is_ancient(final, {"translate", "check"})
    assert not check_is_ancient(final, {"train"})
    assert not check_is_ancient(final, {str(final)}) and not check_is_ancient(final, {f"{final.parent}/./last.pt"})


def test_checks_of_other_code_are_said_once_by_name(tmp_path):
    from aiayn.study.code import stale_checks

    paths = []
    for name, code in [("base", "code-sha256:old"), ("big", "code-sha256:new"), ("h1", "code-sha256:old")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "check.json").write_text(json.dumps({"code": code}))
        paths.append(tmp_path / name / "check.json")
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn/check.json").write_text('{"code": ')  # unreadable: the check rule says so
    line = stale_checks([*paths, tmp_path / "torn/check.json", tmp_path / "absent/check.json"], "code-sha256:new")
    assert line.startswith("the checked code changed since the checks of base, h1 ran: they run again first")
    assert "snakemake checks" in line and "\n" not in line
    assert stale_checks(paths[1:2], "code-sha256:new") is None


def test_the_check_stage_stays_within_its_size():
    """Issue 58's bound: the whole stage, reference included, at most 1,200 lines in check/; no class
    over 150 lines (its functions are bounded with the package's, tests/test_layers.py)."""
    import ast

    files = sorted((ROOT / "src" / "aiayn" / "check").glob("*.py"))
    assert sum(len(f.read_text().splitlines()) for f in files) <= 1200
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno - node.lineno + 1 <= 150, f"{f.name}: {node.name}"
