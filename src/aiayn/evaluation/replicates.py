"""Statistics over training replicates (seeds), after Clark et al. 2011 ("Better hypothesis testing
for statistical machine translation: controlling for optimizer instability", the MultEval tool).

A row of a table trained with k seeds is k systems that differ only in the seed. We report, as
MultEval does:

- `mean`: the mean over the replicates of each one's corpus score;
- `s_sel`: the sample standard deviation over the replicates (Bessel's correction, MultEval's
  MathUtils.stddev): the training noise;

and test a row against base with MultEval's stratified approximate randomization
(StratifiedApproximateRandomizationTest, two-sided): replicate j of the row is paired with
replicate j of base (where the two have as many; else every replicate of one with every replicate
of the other, `strata`), the data points are every (replicate, sentence) pair, each shuffle swaps the
two systems' hypotheses of a data point with probability 1/2, the statistic is the absolute
difference of corpus BLEU over all data points, and p = (#{shuffled > observed} + 1) /
(shuffles + 1): sacreBLEU's paired AR test (which takes the p-value formula from the same Java
file) on the replicates laid end to end, run through its public `PairedTest`; BLEU is
sacreBLEU's (13a, its defaults), as Table 3's paired bootstrap is. One difference on purpose: where the two
systems score the same, both tools count no shuffle as "more different" and give the smallest
p-value there is; we give 1 (nothing to attribute to the systems).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from aiayn.runtime.records import added

SIGNIFICANCE = 0.05  # the level below which a difference is marked significant


def mean_and_spread(values: Sequence[float]) -> tuple[float, float | None]:
    """(mean, s_sel): s_sel is the sample standard deviation (n - 1), None for one value."""
    n = len(values)
    if n == 0:
        raise ValueError("no replicate to average")
    mean = added(values) / n
    if n == 1:
        return mean, None
    return mean, math.sqrt(added((v - mean) ** 2 for v in values) / (n - 1))


def strata(base: Sequence, system: Sequence) -> tuple[list, list]:
    """The pairs of replicates the stratified test compares, as two aligned lists: replicate j of one
    with replicate j of the other where both have as many (MultEval's pairing), else every replicate
    of one with every replicate of the other. Either way each side is all its replicates, each as
    often: the test compares the runs the two rows' means are taken over (one run against base's
    three: that run against each of the three, not against base's first alone)."""
    if len(base) == len(system):
        return list(base), list(system)
    return [b for _ in system for b in base], [s for s in system for _ in base]


def stratified_ar_p(
    ref: Sequence[str],
    base: Sequence[Sequence[str]],
    system: Sequence[Sequence[str]],
    shuffles: int,
) -> float:
    """MultEval's stratified approximate randomization p-value of `system` against `base`, each a
    list of replicates (one decoded file each, in seed order) of the same test set `ref`, paired as
    `strata` pairs them.

    The data points of the stratified test are the (replicate, sentence) pairs, each shuffled on
    its own, and corpus BLEU sums sufficient statistics over all of them: that is sacreBLEU's
    paired AR test (`sacrebleu.significance.PairedTest`, its seed: SACREBLEU_SEED, default 12345)
    on the replicates laid end to end against the reference repeated as often."""
    if not base or not system:
        raise ValueError("no replicate to test")
    base, system = strata(base, system)
    refs = [list(ref) * len(base)]
    a = [line for hyps in base for line in hyps]
    b = [line for hyps in system for line in hyps]
    if BLEU().corpus_score(a, refs).score == BLEU().corpus_score(b, refs).score:
        return 1.0  # MultEval and sacreBLEU would say 1 / (shuffles + 1): "significant" for no difference
    test = PairedTest([("base", a), ("system", b)], {"BLEU": BLEU()}, refs, test_type="ar", n_samples=shuffles)
    _, results = test()
    return results["BLEU"][1].p_value
