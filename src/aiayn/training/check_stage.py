"""The check stage of one experiment (`python -m aiayn check`, the workflow's `check` rule): the
checks of aiayn.training.check on its initial model, then those of aiayn.training.step_check on one
real update of its trainer, and `check.json` written only when every one passed."""

from __future__ import annotations

import gc

from aiayn import described
from aiayn.data import binary
from aiayn.errors import UserError
from aiayn.io import writable
from aiayn.runtime import records
from aiayn.study import resolve
from aiayn.study.code import checked_code
from aiayn.training.batching import collate
from aiayn.training.check import initial_model, run_checks, sample_pairs
from aiayn.training.step_check import composed_step


def check_job(settings_path, train_path, out, *, log=print, detail=None) -> int:
    """The check stage of one experiment (`python -m aiayn check`): its model (experiment.json) as
    the trainer builds it, over a few pairs of its encoded training data; `out` (check.json) is
    written only when every check passes, else a UserError names the first failure. Each check's
    line goes to `detail` (the job's log; default `log`), each failure's and the summary to `log`
    (the terminal too). Returns 0."""
    detail = detail or log
    writable(out)
    settings = resolve.read(settings_path)
    train = binary.read(train_path)
    model = initial_model(settings, train)
    tr = settings["train"]
    pairs = sample_pairs(train)
    batch = collate(train, pairs, pin=False)
    found = run_checks(model, batch, tr, seed=tr["seed"])
    cfg = model.cfg
    del model  # the composed step builds its own, in a trainer (the big model: 0.85 GB less at the peak)
    gc.collect()
    found += composed_step(settings, train, pairs)
    for c in found:
        (detail if c.passed else log)(c.line())
    failed = [c for c in found if not c.passed]
    if failed:
        more = f" (and {len(failed) - 1} more check(s) failed, above)" if len(failed) > 1 else ""
        raise UserError(f"experiment {settings['name']}: {failed[0].line()}{more}; nothing was trained")
    records.write(
        out,
        "check",
        {
            "experiment": settings["name"],
            "passed": True,
            "aiayn": described(),
            "code": checked_code(),
            "model": cfg.to_dict(),
            "pairs": int(batch.src.size(0)),
            "checks": [c.record() for c in found],
        },
    )
    log(f"all {len(found)} checks passed on {settings['name']}'s model: {out}")
    return 0
