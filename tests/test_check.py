"""The check stage (aiayn.training.check): every check passes on the model as built, under every
model option that changes what it measures, and fails on a model broken the way practitioners
break it (a mask filled with 0, attention scaled by d_model, no sqrt(d_model), an unshifted target
input, an untied copy, a schedule off by one or without warmup, label smoothing that is no
distribution, padding read by the encoder), naming the figure and the usual cause."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
import toy
from conftest import ROOT

from aiayn.data import binary
from aiayn.errors import UserError
from aiayn.model.hparams import ModelConfig
from aiayn.model.transformer import MultiHeadAttention, Transformer, build
from aiayn.runtime import records
from aiayn.runtime.schedule import rate
from aiayn.training import check
from aiayn.training.batching import Batch, collate
from aiayn.training.objective import optimizer_and_schedule

NAMES = [
    "inference_determinism",
    "attention_weights",
    "future_leakage",
    "padding",
    "attention_logits",
    "embedding_scale",
    "positional_encoding",
    "shifted_input",
    "tied_weights",
    "schedule",
    "label_smoothing",
    "loss_padding",
    "reference",
    "residual_dropout",
]
STEP = [
    "step_padding",
    "step_decoder_input",
    "step_smoothing",
    "step_future",
    "step_gradients",
    "optimizer",
]  # aiayn.training.step_check
ALL = NAMES + STEP


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return binary.read(toy.corpus(tmp_path_factory.mktemp("check") / "train.bin", n=40, seed=3))


def model_of(**changes) -> Transformer:
    settings = {**toy.SETTINGS["model"], **changes}
    shared = settings.pop("shared_vocab", True)
    cfg = ModelConfig.from_settings(settings, src_vocab=toy.VOCAB, tgt_vocab=toy.VOCAB, shared_vocab=shared)
    torch.manual_seed(0)
    return build(cfg)


def outcome(model, batch, **kw) -> dict[str, check.Check]:
    tr = {**toy.SETTINGS["train"], **kw.pop("train", {})}
    return {c.name: c for c in check.run_checks(model, batch, tr, **kw)}


def batch_of(corpus) -> Batch:
    return collate(corpus, check.sample_pairs(corpus), pin=False)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"init": "fairseq"},
        {"pre_norm": True},
        {"positional": "learned"},
        {"shared_vocab": False},
        {"N": 3, "h": 1, "d_k": 32, "d_v": 32},
        {"d_model": 64, "h": 8, "d_k": 4, "d_v": 16},
    ],
    ids=["base", "fairseq", "pre_norm", "learned", "unshared", "deep_one_head", "small_dk"],
)
def test_every_check_passes_on_the_model_as_built(corpus, changes):
    found = outcome(model_of(**changes), batch_of(corpus))
    assert list(found) == NAMES
    failed = {n: c.line() for n, c in found.items() if not c.passed}
    assert not failed


def test_attention_scale_is_read_from_the_kernel_not_assumed(corpus):
    found = outcome(model_of(), batch_of(corpus))["attention_logits"]
    scales = found.measured["scale_times_sqrt_dk"]
    assert len(scales) == 3 and all(s == pytest.approx(1, abs=1e-4) for s in scales.values())
    assert 0.25 < found.measured["median_variance"] < 4  # footnote 4: about 1 at initialisation


# -- each check on its broken model ---------------------------------------------------------------------
def leaky_kernel(self, q, k, v, mask, causal, p=0.0):
    """The causal mask filled with 0 instead of -inf: a future key gets weight exp(0)."""
    scores = q @ k.transpose(-1, -2) * self.scale
    if causal:
        T, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), 0.0)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


def test_future_leakage_fails_with_a_mask_filled_with_zero(corpus, monkeypatch):
    monkeypatch.setattr(MultiHeadAttention, "kernel", leaky_kernel)
    c = outcome(model_of(), batch_of(corpus))["future_leakage"]
    assert not c.passed and c.measured["largest_change"] > 1e-2
    assert "causal mask filled with 0 instead of -inf" in c.line()


def test_future_leakage_fails_without_a_causal_mask(corpus, monkeypatch):
    real = MultiHeadAttention.kernel
    monkeypatch.setattr(
        MultiHeadAttention, "kernel", lambda self, q, k, v, mask, causal, p=0.0: real(self, q, k, v, mask, False, p)
    )
    assert not outcome(model_of(), batch_of(corpus))["future_leakage"].passed


def test_padding_fails_when_the_encoder_reads_padding(corpus, monkeypatch):
    monkeypatch.setattr(
        Transformer, "src_mask", lambda self, src: torch.ones_like(src, dtype=torch.bool)[:, None, None, :]
    )
    c = outcome(model_of(), batch_of(corpus))["padding"]
    assert not c.passed and "padding mask" in c.cause


@pytest.mark.parametrize("wrong", ["d_model", "sqrt_d_model"])
def test_attention_logits_fail_when_scaled_by_d_model(corpus, wrong):
    model = model_of(d_model=64, h=4, d_k=16, d_v=16)
    for m in model.modules():
        if isinstance(m, MultiHeadAttention):
            m.scale = 1 / 64 if wrong == "d_model" else 1 / math.sqrt(64)
    c = outcome(model, batch_of(corpus))["attention_logits"]
    assert not c.passed
    want = math.sqrt(16) / 64 if wrong == "d_model" else math.sqrt(16 / 64)
    assert all(s == pytest.approx(want, rel=1e-3) for s in c.measured["scale_times_sqrt_dk"].values())
    assert "scaled by d_model or sqrt(d_model)" in c.line()


def test_embedding_scale_fails_without_sqrt_d_model(corpus):
    model = model_of()
    model.src_embed.scale = model.tgt_embed.scale = 1.0
    c = outcome(model, batch_of(corpus))["embedding_scale"]
    assert not c.passed
    assert c.measured["ratio"]["target"] == pytest.approx(math.sqrt(2) / math.sqrt(32), rel=0.3)
    assert "not multiplied by sqrt(d_model)" in c.line()


def test_embedding_scale_fails_when_scaled_twice(corpus):
    model = model_of()
    model.src_embed.scale = model.tgt_embed.scale = 32.0
    c = outcome(model, batch_of(corpus))["embedding_scale"]
    assert not c.passed and "drown the positions" in c.cause


def test_shifted_input_fails_on_an_unshifted_target(corpus):
    b = batch_of(corpus)
    unshifted = Batch(b.src, b.tgt_out.clone(), b.tgt_out, b.src_tokens, b.tgt_tokens)
    c = outcome(model_of(), unshifted)["shifted_input"]
    assert not c.passed and c.measured["shifted"] == 0
    assert "[BOS] y[:-1]" in c.line()


class UntiedCopy(Transformer):
    """The pre-softmax projection an nn.Parameter of its own, a copy of the embedding at initialisation."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.copy = torch.nn.Parameter(self.tgt_embed.weight.detach().clone())

    @property
    def projection(self):
        return self.copy


def test_tied_weights_fail_on_an_untied_copy(corpus):
    cfg = model_of().cfg
    torch.manual_seed(0)
    c = outcome(UntiedCopy(cfg), batch_of(corpus))["tied_weights"]
    assert not c.passed and "not at all" in c.figure


def test_tied_weights_fail_when_a_shared_vocabulary_has_two_embeddings(corpus):
    model = model_of()
    model.src_embed.weight = torch.nn.Parameter(model.tgt_embed.weight.detach().clone())
    c = outcome(model, batch_of(corpus))["tied_weights"]
    assert not c.passed and c.measured["tensors"] == 2


def off_by_one(parameters, tr, d_model, device_type="cpu"):
    optimizer, _ = optimizer_and_schedule(parameters, tr, d_model, device_type)
    w, s = tr["warmup_steps"], tr["lr_scale"]
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: rate(max(u, 1), d_model, w, s))


def no_warmup(parameters, tr, d_model, device_type="cpu"):
    optimizer, _ = optimizer_and_schedule(parameters, tr, d_model, device_type)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: d_model**-0.5 * (u + 1) ** -0.5)


@pytest.mark.parametrize("builder, peak_step", [(off_by_one, 51), (no_warmup, 1)])
def test_schedule_fails_off_its_formula(corpus, builder, peak_step):
    c = outcome(model_of(), batch_of(corpus), builder=builder)["schedule"]
    assert not c.passed and c.measured["peak_step"] == peak_step
    assert "warmup" in c.cause


def smoothing_over_every_class(logits, target, eps):
    """eps on every class (not eps / V): a target that sums to 1 - eps + eps·V."""
    logp = torch.log_softmax(logits.float().flatten(0, 1), -1)
    nll = -logp.gather(1, target.flatten().unsqueeze(1)).squeeze(1)
    return ((1 - eps) * nll - eps * logp.sum(-1)).sum()


def torch_smoothing(logits, target, eps):
    """torch's label_smoothing=eps: eps/V on every class, the reference included (1 - eps + eps/V)."""
    return torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), target.flatten(), label_smoothing=eps, reduction="sum"
    )


def smoothing_lost(logits, target, eps):
    """eps_ls dropped on the way to the loss (a one-hot target)."""
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="sum")


@pytest.mark.parametrize(
    "loss, cause",
    [(smoothing_over_every_class, "no distribution (it sums to"), (torch_smoothing, "torch's label_smoothing=eps_ls"),
     (smoothing_lost, "no smoothing: eps_ls = 0.1 lost")],
)  # fmt: skip
def test_label_smoothing_fails_on_a_target_that_is_not_the_papers_naming_its_cause(corpus, loss, cause):
    c = outcome(model_of(), batch_of(corpus), loss=loss)["label_smoothing"]
    assert not c.passed and cause in c.cause, c.line()


# -- the command -------------------------------------------------------------------------------------------
def test_check_command_writes_every_figure(tmp_path):
    settings = toy.settings()
    (tmp_path / "experiment.json").write_text(json.dumps(settings))
    toy.corpus(tmp_path / "train.bin", n=40)
    out = tmp_path / "check.json"
    cmd = [sys.executable, "-m", "aiayn", "check", "--settings", str(tmp_path / "experiment.json"),
           "--train", str(tmp_path / "train.bin"), "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=toy.env_for_subprocess(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    record = records.read(out, "check")
    assert [c["check"] for c in record["checks"]] == ALL
    assert all(c["passed"] for c in record["checks"])
    # by hand: every check's line and the verdict on stdout; stderr keeps to a failure's one line
    assert proc.stdout.count(": ok (") == len(ALL) and f"all {len(ALL)} checks passed" in proc.stdout
    assert not proc.stderr
    # as a rule runs it (--log-to): the checks' lines in the log only, the verdict on the terminal too
    log = tmp_path / "check.log"
    proc = subprocess.run([*cmd, "--log-to", str(log)], capture_output=True, text=True, env=toy.env_for_subprocess(),
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0 and ": ok (" not in proc.stdout and f"all {len(ALL)} checks passed" in proc.stdout
    assert log.read_text().count(": ok (") == len(ALL) and not proc.stderr


def test_a_failed_check_stops_with_one_line_and_writes_nothing(tmp_path, monkeypatch):
    (tmp_path / "experiment.json").write_text(json.dumps(toy.settings()))
    toy.corpus(tmp_path / "train.bin", n=40)
    monkeypatch.setattr(MultiHeadAttention, "kernel", leaky_kernel)
    lines = []
    with pytest.raises(UserError) as info:
        check.check_job(tmp_path / "experiment.json", tmp_path / "train.bin", tmp_path / "check.json", log=lines.append)
    said = str(info.value)
    assert "\n" not in said
    assert said.startswith("experiment toy: check future_leakage failed: changing the target after position")
    assert "usual cause: the decoder's causal mask filled with 0" in said
    assert not (tmp_path / "check.json").exists()
    assert any(line.startswith("check future_leakage failed") for line in lines)


def test_the_check_builds_the_trainers_initial_model(tmp_path):
    """The same seed, the same draw: the model checked is the one that trains."""
    trainer = toy.make_trainer(tmp_path, toy.settings(seed=7))
    checked = check.initial_model(toy.settings(seed=7), trainer.train_data)
    toy.assert_same_weights(checked.state_dict(), trainer.model.state_dict())


def test_the_checked_code_is_the_code_that_builds_and_trains_a_model(tmp_path):
    """check.json records `checked_code()`: it changes with the model, the trainer, the loss or the
    schedule, and not with the report or the commands (whose change leaves every check valid)."""
    import shutil

    from aiayn.study.code import PACKAGE, checked_code

    copy = tmp_path / "aiayn"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = checked_code(copy)
    assert before == checked_code() and before.startswith("code-sha256:")
    for name in ("model/transformer.py", "training/objective.py", "training/train.py", "runtime/schedule.py"):
        path = copy / name
        original = path.read_bytes()
        path.write_bytes(original + b"\n# changed\n")
        assert checked_code(copy) != before, name
        path.write_bytes(original)
    for name in ("report/tables.py", "cli.py", "evaluation/translate.py"):
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


# -- bugs written into the source, as a person writes them ------------------------------------------------
# (file under src/aiayn, the text as it is, the text with the bug): each case runs `python -m aiayn
# check` on a copy of the package with that one edit, and the one line must name the check, the figure,
# where, and the cause that fits it
SOURCE_BUGS = {
    "the target passed as the decoder input": (
        "training/train.py", "logits = module(batch.src, batch.tgt_in)", "logits = module(batch.src, batch.tgt_out)",
        "step_decoder_input", ["the target itself passed as the decoder input"],
    ),
    "eps_ls lost on the way to the loss": (
        "training/train.py", 'loss = label_smoothed_loss(logits, batch.tgt_out, self.tr["eps_ls"])',
        'loss = label_smoothed_loss(logits, batch.tgt_out, self.tr.get("label_smoothing", 0.0))',
        "step_smoothing", ["puts 1 of its weight on the reference", "no smoothing: eps_ls = 0.1 lost"],
    ),
    "torch's smoothing convention": (
        "training/objective.py", "smoothing = eps_ls * V / (V - 1) if V > 1 else 0.0", "smoothing = eps_ls",
        "label_smoothing", ["with 0.904167 on the reference", "torch's label_smoothing=eps_ls convention"],
    ),
    "positions added twice": (
        "model/transformer.py", "x = F.embedding(tokens, self.weight) * self.scale  #",
        "x = F.embedding(tokens, self.weight) * self.scale + self.positions(tokens.size(1), offset, tokens.device)  #",
        "positional_encoding", ["source 2", "added twice"],
    ),
    "positions never added": (
        "model/transformer.py", "return self.dropout(x + pos.to(x.dtype))", "return self.dropout(x)",
        "positional_encoding", ["source 0", "no positional encoding added"],
    ),
    "no causal mask": (
        "model/transformer.py", "self.self_attn(y, y, causal=True)", "self.self_attn(y, y)",
        "future_leakage", ["first in decoder layer 1 (its self-attention)", "causal mask"],
    ),
    "a causal mask only outside training": (
        "model/transformer.py", "self.self_attn(y, y, causal=True)", "self.self_attn(y, y, causal=not self.training)",
        "step_future", ["first in decoder layer 1's self-attention", "a causal mask the training step does not apply"],
    ),
    "no padding mask in the encoder-decoder attention": (
        "model/transformer.py", "self.cross_attn(y, memory, src_mask)", "self.cross_attn(y, memory)",
        "padding", ["first in decoder layer 1's encoder-decoder attention", "not passed to decoder layer 1's"],
    ),
    "attention scaled twice": (
        "model/transformer.py", "q = self.split(self.W_q(x), self.d_k)",
        "q = self.split(self.W_q(x), self.d_k) * self.scale",
        "attention_logits", ["applied scale x sqrt(d_k) = 0.3536", "scaled twice"],
    ),
    "the encoder's output detached": (
        "model/transformer.py", "return self.encoder_norm(x), mask", "return self.encoder_norm(x).detach(), mask",
        "step_gradients", ["none reached encoder.0", "the graph cut before them"],
    ),
}  # fmt: skip
# the issue-54 set: bugs that trained before with nothing said, or were named under the wrong cause;
# here the one line on stderr (the first failure) must name the check and the cause that fits
T = "model/transformer.py"
FIRST_LINE_BUGS = {
    "the residual dropped around the encoder-decoder attention": (
        T, "        x = self.sub[1](x, lambda y: self.cross_attn(y, memory, src_mask))\n        return self.sub[2](x, self.ffn)\n\n",  # noqa: E501
        "        x = self.sub[1].norm(self.sub[1].dropout(self.cross_attn(x, memory, src_mask)))\n"
        "        return self.sub[2](x, self.ffn)\n\n",
        "reference", ["the input of decoder layer 1's feed-forward network",
                      "the residual connection dropped around decoder layer 1's encoder-decoder attention"],
    ),
    "Adam's betas swapped": (
        "training/objective.py", 'betas=(tr["adam_beta1"], tr["adam_beta2"])', 'betas=(tr["adam_beta2"], tr["adam_beta1"])',  # noqa: E501
        "optimizer", ["beta1 0.98, beta2 0.9", "beta1 and beta2 swapped"],
    ),
    "Adam's eps hard-coded": (
        "training/objective.py", 'eps=tr["adam_eps"]', "eps=1e-8", "optimizer", ["eps 1e-08 (the reference's 1e-09)"],
    ),
    "the positions added again in the encoder": (
        T, "        x = self.src_embed(src)\n",
        "        x = self.src_embed(src)\n        x = x + sinusoidal_positions(src.size(1), self.cfg.d_model).to(x.dtype)\n",  # noqa: E501
        "reference", ["the input of encoder layer 1", "the positional encoding added again between the source embedding"],  # noqa: E501
    ),
    "pre-LN in one encoder layer": (
        T, "        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(2)])",
        "        self.sub = nn.ModuleList([SublayerConnection(cfg) for _ in range(2)])\n        self.sub[0].pre_norm = True",  # noqa: E501
        "reference", ["the input of encoder layer 1's self-attention", "reading LayerNorm(x), the pre-LN variant"],
    ),
    "dropout left on at inference": (
        T, "return self.dropout(x + pos.to(x.dtype))", "return F.dropout(x + pos.to(x.dtype), self.dropout.p)",
        "inference_determinism", ["first in src_embed", "dropout applied at inference"],
    ),
    "the softmax over the wrong axis": (
        T, "    return scores.softmax(-1)\n\n\nclass MultiHeadAttention",
        "    return scores.softmax(-2)\n\n\nclass MultiHeadAttention",
        "attention_weights", ["the softmax taken over the queries (dim -2)"],
    ),
    "padding counted in the loss": (
        "training/objective.py", 'F.cross_entropy(flat, target, ignore_index=PAD, label_smoothing=smoothing, reduction="sum")',  # noqa: E501
        'F.cross_entropy(flat, target, label_smoothing=smoothing, reduction="sum")',
        "loss_padding", ["padding targets counted in the loss"],
    ),
    "GELU in the feed-forward network": (
        T, "return self.W_2(F.relu(self.W_1(x)))", "return self.W_2(F.gelu(self.W_1(x)))",
        "reference", ["encoder layer 1's feed-forward network", "GELU, not ReLU"],
    ),
    "no residual dropout": (
        T, "        return self.norm(x + self.dropout(sublayer(x)))", "        return self.norm(x + sublayer(x))",
        "residual_dropout", ["nothing dropped at encoder layer 1's self-attention"],
    ),
    "a final layer norm under post-LN": (
        T, "        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()",
        "        self.decoder_norm = nn.LayerNorm(cfg.d_model)",
        "reference", ["parameters §3 does not: decoder_norm.weight"],
    ),
}  # fmt: skip
HARMLESS = {
    "attention written out (softmax, not the fused kernel)": (
        "model/transformer.py",
        "return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, scale=self.scale)",  # noqa: E501
        "return F.dropout(attention_weights(q, k, mask, causal, self.scale), p) @ v",
    ),
    "the sinusoids by exp and log": (
        "model/transformer.py",
        "angle = pos / torch.pow(10000.0, torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)",
        "angle = pos * torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))",
    ),
    "the heads split by reshape and permute": (
        "model/transformer.py",
        "return x.view(B, T, self.h, width).transpose(1, 2)  # (B, h, T, width)",
        "return x.reshape(B, T, self.h, width).permute(0, 2, 1, 3)  # (B, h, T, width)",
    ),
    "the sinusoids in halves (tensor2tensor's layout)": (
        "model/transformer.py",
        "pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)",
        "pe[:, : d_model // 2] = torch.sin(angle)\n    pe[:, d_model // 2 :] = torch.cos(angle)",
    ),
}


def check_with_edit(tmp_path, file: str, old: str, new: str, *more) -> subprocess.CompletedProcess:
    """`python -m aiayn check` of a two-layer toy experiment, run from a copy of the package with
    `old` replaced by `new` in `file` (and in each further (file, old, new) of `more`)."""
    import shutil

    package = tmp_path / "src" / "aiayn"
    shutil.copytree(ROOT / "src" / "aiayn", package, ignore=shutil.ignore_patterns("__pycache__"))
    for file, old, new in [(file, old, new), *more]:
        path = package / file
        text = path.read_text()
        assert text.count(old) == 1, f"{file}: the text to change is not there once: {old}"
        path.write_text(text.replace(old, new))
    settings = toy.settings()
    settings["model"] = {**settings["model"], "N": 2}
    (tmp_path / "experiment.json").write_text(json.dumps(settings))
    toy.corpus(tmp_path / "train.bin", n=40)
    env = {**toy.env_for_subprocess(), "PYTHONPATH": str(tmp_path / "src")}
    cmd = [sys.executable, "-m", "aiayn", "check", "--settings", str(tmp_path / "experiment.json"),
           "--train", str(tmp_path / "train.bin"), "--out", str(tmp_path / "check.json")]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(SOURCE_BUGS))
def test_a_bug_written_into_the_source_fails_its_check_naming_where_and_why(bug, tmp_path):
    file, old, new, name, said = SOURCE_BUGS[bug]
    run = check_with_edit(tmp_path, file, old, new)
    err = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(err) == 1, run.stderr[-3000:]
    assert f"check {name} failed: " in run.stdout + run.stderr, run.stdout[-3000:]
    line = next(x for x in (run.stdout + run.stderr).splitlines() if x.startswith(f"check {name} failed: "))
    assert all(s in line for s in said), line
    assert not (tmp_path / "check.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(FIRST_LINE_BUGS))
def test_a_bug_of_the_composition_stops_with_one_line_naming_its_cause(bug, tmp_path):
    file, old, new, name, said = FIRST_LINE_BUGS[bug]
    more = [
        (
            T,
            "return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, "
            "scale=self.scale)",
            "return F.dropout(attention_weights(q, k, mask, causal, self.scale), p) @ v",
        )
    ]
    run = check_with_edit(tmp_path, file, old, new, *(more if "softmax" in bug else []))  # fmt: skip
    err = [line for line in run.stderr.strip().splitlines() if "aiayn check: error" in line]
    assert run.returncode == 2 and len(err) == 1, run.stderr[-3000:]
    assert f"experiment toy: check {name} failed: " in err[0], err[0]
    assert all(s in err[0] for s in said), err[0]
    assert not (tmp_path / "check.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("rewrite", sorted(HARMLESS))
def test_a_harmless_rewrite_passes_every_check(rewrite, tmp_path):
    run = check_with_edit(tmp_path, *HARMLESS[rewrite])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"all {len(ALL)} checks passed" in run.stdout
