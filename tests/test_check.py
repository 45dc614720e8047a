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
    "future_leakage",
    "padding",
    "attention_logits",
    "embedding_scale",
    "shifted_input",
    "tied_weights",
    "schedule",
    "label_smoothing",
]


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


@pytest.mark.parametrize("loss", [smoothing_over_every_class, torch_smoothing])
def test_label_smoothing_fails_on_a_target_that_is_not_the_papers(corpus, loss):
    c = outcome(model_of(), batch_of(corpus), loss=loss)["label_smoothing"]
    assert not c.passed


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
    assert [c["check"] for c in record["checks"]] == NAMES
    assert all(c["passed"] for c in record["checks"])
    # by hand: every check's line and the verdict on stdout; stderr keeps to a failure's one line
    assert proc.stdout.count(": ok (") == len(NAMES) and "all 8 checks passed" in proc.stdout and not proc.stderr
    # as a rule runs it (--log-to): the checks' lines in the log only, the verdict on the terminal too
    log = tmp_path / "check.log"
    proc = subprocess.run([*cmd, "--log-to", str(log)], capture_output=True, text=True, env=toy.env_for_subprocess(),
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0 and ": ok (" not in proc.stdout and "all 8 checks passed" in proc.stdout
    assert log.read_text().count(": ok (") == len(NAMES) and not proc.stderr


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
