"""Beam search against scripted per-step probability tables, and on real (tiny) models."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.evaluation.translate import length_sorted_batches, max_steps, progress_lines, translate
from aiayn.model.beam import beam_search, length_penalty
from aiayn.model.hparams import ModelConfig
from aiayn.model.transformer import Transformer

BOS, EOS, A, B, C = 2, 3, 4, 5, 6
V = 7
TINY = 1e-9  # about the probability of every token a table does not list (distinct: no ties)


class Scripted:
    """A 'model' whose next-token distribution is looked up from the prefix; counts its steps."""

    def __init__(self, table: dict[tuple, dict[int, float]], rows: int):
        self.table, self.prefixes, self.calls = table, [()] * rows, 0

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.prefixes = [p + (int(t),) if int(t) != BOS else p for p, t in zip(self.prefixes, tokens)]
        out = (TINY * (1 + torch.arange(V, dtype=torch.float64) / 100)).repeat(len(self.prefixes), 1)
        for row, prefix in enumerate(self.prefixes):
            for token, p in self.table.get(prefix, {}).items():
                out[row, token] = p
        return out.log()

    def reorder(self, rows: torch.Tensor) -> None:
        self.prefixes = [self.prefixes[i] for i in rows.tolist()]


TABLE = {
    (): {A: 0.5, B: 0.4, EOS: 0.1},
    (A,): {EOS: 0.4, C: 0.6},
    (B,): {EOS: 0.9, C: 0.1},
    (A, C): {EOS: 1.0},
    (B, C): {EOS: 1.0},
}


def search(table, *, beam, alpha, limit=10, nbest=1, sentences=1):
    model = Scripted(table, sentences * beam)
    hyps = beam_search(
        model.step, model.reorder, max_steps=[limit] * sentences, beam=beam, alpha=alpha, bos=BOS, eos=EOS, nbest=nbest
    )
    return hyps, model


def test_exact_hypotheses_and_scores():
    (hyps,), _ = search(TABLE, beam=2, alpha=0.0, nbest=3)
    assert [h.tokens for h in hyps] == [[B], [A, C], [A]]
    assert [h.logprob for h in hyps] == pytest.approx([math.log(0.36), math.log(0.30), math.log(0.20)], abs=1e-6)
    assert [h.score for h in hyps] == pytest.approx([h.logprob for h in hyps])  # alpha 0: no penalty


def test_length_penalty_changes_the_winner():
    (best,), _ = search(TABLE, beam=2, alpha=0.0)
    assert best[0].tokens == [B]
    (best,), _ = search(TABLE, beam=2, alpha=2.0)
    assert best[0].tokens == [A, C]  # log .3 / lp(3) beats log .36 / lp(2)
    assert best[0].score == pytest.approx(math.log(0.3) / length_penalty(3, 2.0), abs=1e-6)
    assert length_penalty(1, 0.6) == pytest.approx((6 / 6) ** 0.6) and length_penalty(5, 0.6) == pytest.approx(
        (10 / 6) ** 0.6
    )


def test_maximum_length_forces_eos():
    never_ends = {(): {A: 1.0}, (A,): {A: 1.0}, (A, A): {A: 1.0}, (A, A, A): {A: 1.0}}
    (best,), model = search(never_ends, beam=2, alpha=0.6, limit=4)
    assert best[0].tokens == [A, A, A]  # 3 tokens + the forced EOS = max_steps 4
    assert model.calls == 4
    assert max_steps(10, 1.0, 50) == 61  # §6.1: input length + 50, plus the EOS


def test_early_stop_when_no_live_hypothesis_can_win():
    early = {(): {EOS: 0.6, A: 0.4}, (A,): {A: 1.0}}
    (best,), model = search(early, beam=2, alpha=0.0, limit=50)
    assert best[0].tokens == [] and model.calls == 1  # live log .4 can only fall below finished log .6: stop
    # with a length penalty the bound is log P / lp(max length) = log P / 3.78 (lp(50), alpha 0.6)
    (best,), model = search(early, beam=2, alpha=0.6, limit=50)
    # one output (tensor2tensor's stop_early): the best finished, EOS (log .6 = -0.51), against the
    # best live A A (log .4 -> bound -0.24 after steps 1 and 2: it may still win), then A A + ~1e-9
    # (log -21.6 -> bound -5.7 after step 3: it cannot): 3 steps
    assert best[0].tokens == [] and model.calls == 3
    # two outputs: the 2nd best finished must beat the bound. It is A A EOS from step 3 (log 4.1e-10
    # / lp(3) = -18.2); the live A A + ~1e-9 per token (log -21.6, -42.2, -63.3, -84.4 after steps
    # 3..6) is bounded by -16.7 after step 5, which can still beat -18.2, and -22.3 after step 6: 6 steps
    (two,), model = search(early, beam=2, alpha=0.6, limit=50, nbest=2)
    assert model.calls == 6 and two[0].tokens == best[0].tokens
    (best,), model = search(TABLE, beam=2, alpha=0.0, limit=50)
    assert best[0].tokens == [B] and model.calls == 2  # after step 2 finished B (.36) beats live A C (.3)
    (two,), model = search(TABLE, beam=2, alpha=0.0, limit=50, nbest=2)
    assert model.calls == 3  # the 2nd best finished, A (.2), does not: one more step, for A C (.3)
    assert [h.tokens for h in two] == [[B], [A, C]]


def test_eos_ends_a_hypothesis():
    (hyps,), _ = search(TABLE, beam=2, alpha=0.0, nbest=5)
    assert all(EOS not in h.tokens and BOS not in h.tokens for h in hyps)
    assert [] in [h.tokens for h in hyps]  # EOS at the first step is a (poor) finished hypothesis


def test_batched_sentences_do_not_mix():
    other = {(): {C: 0.7, EOS: 0.3}, (C,): {EOS: 1.0}}

    class Two(Scripted):  # sentence 0 follows TABLE, sentence 1 follows `other`
        def __init__(self):
            super().__init__(TABLE, 4)
            self.owner = [0, 0, 1, 1]

        def step(self, tokens):
            self.calls += 1
            self.prefixes = [p + (int(t),) if int(t) != BOS else p for p, t in zip(self.prefixes, tokens)]
            out = (TINY * (1 + torch.arange(V, dtype=torch.float64) / 100)).repeat(len(self.prefixes), 1)
            for row, (prefix, who) in enumerate(zip(self.prefixes, self.owner)):
                for token, p in (TABLE if who == 0 else other).get(prefix, {}).items():
                    out[row, token] = p
            return out.log()

        def reorder(self, rows):
            super().reorder(rows)
            self.owner = [self.owner[i] for i in rows.tolist()]

    model = Two()
    first, second = beam_search(model.step, model.reorder, max_steps=[10, 10], beam=2, alpha=0.0, bos=BOS, eos=EOS)
    assert first[0].tokens == [B] and second[0].tokens == [C]


# -- on real models ----------------------------------------------------------------------------------
def tiny_model(seed=0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(
        ModelConfig(src_vocab=20, tgt_vocab=20, N=2, d_model=32, d_ff=64, h=4, d_k=8, d_v=8, P_drop=0.1)
    ).eval()


def greedy(model: Transformer, src: list[int], limit: int) -> tuple[list[int], float]:
    """Greedy decoding with full forward passes (no cache): the reference for beam 1."""
    x = torch.tensor([src + [EOS]])
    out, logprob = [BOS], 0.0
    with torch.no_grad():
        for _ in range(limit):
            logp = torch.log_softmax(model(x, torch.tensor([out]))[0, -1], -1)
            if len(out) == limit:
                token = EOS
            else:
                token = int(logp.argmax())
            logprob += float(logp[token])
            if token == EOS:
                break
            out.append(token)
    return out[1:], logprob


def test_beam_one_is_greedy():
    model = tiny_model()
    sources = [[5, 6, 7], [8, 9, 10, 11, 12], [4]]
    hyps = translate(model, sources, beam=1, alpha=0.0, max_len_a=1.0, max_len_b=5)
    for src, (h,) in zip(sources, hyps):
        tokens, logprob = greedy(model, src, max_steps(len(src), 1.0, 5))
        assert h.tokens == tokens
        assert h.logprob == pytest.approx(logprob, abs=1e-4)


def test_batching_restores_input_order_and_changes_nothing():
    model = tiny_model(1)
    g = torch.Generator().manual_seed(0)
    sources = [torch.randint(4, 20, (int(n),), generator=g).tolist() for n in torch.randint(1, 12, (15,), generator=g)]
    together = translate(model, sources, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=10, batch_tokens=40)
    alone = [translate(model, [s], beam=4, alpha=0.6, max_len_a=1.0, max_len_b=10)[0] for s in sources]
    assert [h[0].tokens for h in together] == [h[0].tokens for h in alone]
    assert [h[0].score for h in together] == pytest.approx([h[0].score for h in alone], abs=1e-4)
    assert len(length_sorted_batches([len(s) + 1 for s in sources], 40)) > 1


@pytest.mark.slow
def test_beam_never_scores_below_greedy_on_a_trained_model(tmp_path):
    import toy

    from aiayn.data import binary
    from aiayn.runtime import checkpoint

    settings = toy.settings(steps=500, warmup_steps=100, checkpoint_interval=500, log_interval=100)
    settings["model"].update(N=2, d_model=64, d_ff=256, d_k=16, d_v=16)
    toy.corpus(tmp_path / "train.bin", n=2000, seed=0, max_len=8)
    toy.corpus(tmp_path / "dev.bin", n=50, seed=1, max_len=8)
    assert toy.train_in_process(tmp_path, settings) == 0
    model = checkpoint.rebuild(checkpoint.load(tmp_path / "checkpoints" / "last.pt")).eval()
    dev = binary.read(tmp_path / "dev.bin")
    sources = [dev.src(i).tolist() for i in range(len(dev))]
    beam = translate(model, sources, beam=4, alpha=0.0, max_len_a=1.0, max_len_b=10)
    best = translate(model, sources, beam=1, alpha=0.0, max_len_a=1.0, max_len_b=10)
    assert all(b[0].logprob >= g[0].logprob - 1e-5 for b, g in zip(beam, best))
    assert sum(b[0].logprob > g[0].logprob + 1e-5 for b, g in zip(beam, best)) >= 1  # beam does find better ones
    assert sum(b[0].tokens == s[::-1] for b, s in zip(beam, sources)) >= 5  # and the model did learn to reverse


def test_translate_command_writes_the_nbest_list(tmp_path):
    """`translate --nbest 3`: three hypotheses per line, best first, the first one the 1-best output,
    scores those of the search."""
    from aiayn.cli import main
    from aiayn.data import vocab
    from aiayn.runtime import checkpoint

    text = tmp_path / "text.txt"
    text.write_text("".join(f"{w} {x} {w}{x}\n" for w in ("ab", "cd", "ef", "gh") for x in ("ij", "kl", "mn")))
    vocab.train([text], tmp_path / "spm.model", model_type="bpe", size=40, input_sentence_size=0)
    size = vocab.load(tmp_path / "spm.model").GetPieceSize()
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(src_vocab=size, tgt_vocab=size, N=1, d_model=16, d_ff=32, h=2, d_k=8, d_v=8, P_drop=0.1)
    )
    checkpoint.save(checkpoint.model_payload(model), tmp_path / "model.pt")
    (tmp_path / "in.txt").write_text("ab ij\ncd kl mn\nef\n")
    out = tmp_path / "out.txt"
    spm = str(tmp_path / "spm.model")
    assert (
        main(
            [
                "translate",
                "--model",
                str(tmp_path / "model.pt"),
                "--input",
                str(tmp_path / "in.txt"),
                "--spm-src",
                spm,
                "--spm-tgt",
                spm,
                "--out",
                str(out),
                "--nbest",
                "3",
                "--device",
                "cpu",
                "--decode",
                '{"max_len_b": 4}',
            ]
        )
        == 0
    )
    best = out.read_text().splitlines()
    rows = [line.split("\t") for line in (tmp_path / "out.txt.nbest").read_text().splitlines()]
    assert len(best) == 3 and [int(r[0]) for r in rows] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    sp = vocab.load(spm)
    hyps = translate(
        model.eval(),
        vocab.to_ids(sp, ["ab ij", "cd kl mn", "ef"]),
        beam=4,
        alpha=0.6,
        max_len_a=1.0,
        max_len_b=4,
        nbest=3,
    )
    for i, hs in enumerate(hyps):
        mine = rows[3 * i : 3 * i + 3]
        assert [float(r[1]) for r in mine] == pytest.approx([h.score for h in hs], abs=1e-5)
        assert [float(r[1]) for r in mine] == sorted((float(r[1]) for r in mine), reverse=True)
        assert mine[0][3] == best[i] == vocab.to_text(sp, hs[0].tokens)


def test_translation_progress_says_every_tenth_though_batches_jump_over_its_marks():
    """Decoding finishes whole batches (47 sentences here): a line each time another tenth of the 300
    is passed, and one at the end (the demo's case, 40 sentences in one batch, said only its last)."""
    said = []
    progress = progress_lines(300, said.append)
    for done in [*range(47, 300, 47), 300]:
        progress(done, 1.0)
    assert [line.split(" sentences")[0] for line in said] == [
        "translated 47/300", "translated 94/300", "translated 141/300", "translated 188/300",
        "translated 235/300", "translated 282/300", "translated 300/300",
    ]  # fmt: skip
    one = []
    progress = progress_lines(40, one.append)
    progress(40, 2.0)
    assert one == ["translated 40/40 sentences, 20.0 sentences/s"]
