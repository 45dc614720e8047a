"""Statistics over training replicates (seeds), after Clark et al. 2011 ("Better hypothesis testing
for statistical machine translation: controlling for optimizer instability", the MultEval tool).

A row of a table trained with k seeds is k systems that differ only in the seed. We report, as
MultEval does:

- `mean`: the mean over the replicates of each one's corpus score;
- `s_sel`: the sample standard deviation over the replicates (Bessel's correction, MultEval's
  MathUtils.stddev): the training noise;

and test a row against base with MultEval's stratified approximate randomization
(StratifiedApproximateRandomizationTest, two-sided): replicate j of the row is paired with
replicate j of base, the data points are every (replicate, sentence) pair, each shuffle swaps the
two systems' hypotheses of a data point with probability 1/2, the statistic is the absolute
difference of corpus BLEU over all data points, and p = (#{shuffled > observed} + 1) /
(shuffles + 1). With one replicate each this is exactly sacreBLEU's paired AR test (its
`_paired_ar_test`, which takes the p-value formula from the same Java file); BLEU is sacreBLEU's
(13a, its defaults), as Table 3's paired bootstrap is. One difference on purpose: where the two
systems score the same, both tools count no shuffle as "more different" and give the smallest
p-value there is; we give 1 (nothing to attribute to the systems).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import sacrebleu

SIGNIFICANCE = 0.05  # the level below which a difference is marked significant


def mean_and_spread(values: Sequence[float]) -> tuple[float, float | None]:
    """(mean, s_sel): s_sel is the sample standard deviation (n - 1), None for one value."""
    n = len(values)
    if n == 0:
        raise ValueError("no replicate to average")
    mean = sum(values) / n
    if n == 1:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def _bleu() -> sacrebleu.metrics.BLEU:
    return sacrebleu.metrics.BLEU()


def sentence_stats(hyps: Sequence[str], ref: Sequence[str]) -> np.ndarray:
    """sacreBLEU's BLEU sufficient statistics of each sentence: (lines, 2 + 2 * 4)."""
    return np.asarray(_bleu()._extract_corpus_statistics(list(hyps), [list(ref)]), dtype=np.int64)


def _score(metric, stats_sum) -> float:
    return metric._compute_score_from_stats(list(stats_sum)).score


def stratified_ar_p(
    ref: Sequence[str],
    base: Sequence[Sequence[str]],
    system: Sequence[Sequence[str]],
    shuffles: int,
    seed: int = 12345,
) -> float:
    """MultEval's stratified approximate randomization p-value of `system` against `base`, each a
    list of replicates (one decoded file each, in seed order) of the same test set `ref`. Replicate
    j is paired with replicate j; only as many pairs as the shorter list has are tested."""
    k = min(len(base), len(system))
    if k == 0:
        raise ValueError("no replicate to test")
    metric = _bleu()
    a = np.concatenate([sentence_stats(h, ref) for h in base[:k]])
    b = np.concatenate([sentence_stats(h, ref) for h in system[:k]])
    observed = abs(_score(metric, a.sum(0)) - _score(metric, b.sum(0)))
    if observed == 0:  # MultEval and sacreBLEU would say 1 / (shuffles + 1): "significant" for no difference
        return 1.0
    rng = np.random.default_rng(seed)
    pos = rng.integers(2, size=(shuffles, len(a)), dtype=bool)
    neg = ~pos
    shuf_a, shuf_b = pos @ a + neg @ b, neg @ a + pos @ b
    diffs = np.array([abs(_score(metric, x) - _score(metric, y)) for x, y in zip(shuf_a, shuf_b)])
    return (int(np.sum(diffs > observed)) + 1) / (shuffles + 1)
