"""The parameter count of every experiment's model beside the paper's (Table 3's "params" column).

Needs no training and no data: each model is built on PyTorch's meta device (shapes only) with
the vocabulary sizes of its dataset as configured (§5.1: 37k shared EN-DE, 32k EN-FR).
"""

from __future__ import annotations

from aiayn.errors import UserError
from aiayn.model.hparams import ModelConfig
from aiayn.model.transformer import build, count_parameters
from aiayn.study import config as cfg
from aiayn.study.grid import Study

COLUMNS = ("experiment", "tables", "row", "N", "d_model", "d_ff", "h", "d_k", "d_v", "vocab", "params_M", "paper_M")


def model_config(exp: dict) -> ModelConfig:
    """The ModelConfig an experiment builds, vocabulary sizes from its dataset's vocab settings."""
    vocab = exp["vocab"]
    return ModelConfig.from_settings(
        exp["model"], src_vocab=vocab["size"], tgt_vocab=vocab["size"], shared_vocab=vocab["shared"]
    )


def parameter_rows(study: Study, names: list[str] | None = None) -> list[dict]:
    rows = []
    for name in names or list(study.config["experiments"]):  # as configured: left-out ones too, no candidates
        exp = study.configured(name)
        m = exp["model"]
        counted = count_parameters(build(model_config(exp), device="meta"))
        rows.append(
            {
                "experiment": name,
                "tables": ",".join(map(str, exp["tables"])),
                "row": exp["row"] or "",
                "N": m["N"],
                "d_model": m["d_model"],
                "d_ff": m["d_ff"],
                "h": m["h"],
                "d_k": m["d_k"],
                "d_v": m["d_v"],
                "vocab": exp["vocab"]["size"],
                "params_M": counted / 1e6,
                "paper_M": exp["paper"].get("params_m"),
                "params": counted,
            }
        )
    return rows


def format_table(rows: list[dict]) -> str:
    def cell(row, col):
        v = row[col]
        if col == "params_M":
            return f"{v:.1f}"
        return "" if v is None else str(v)

    cells = [list(COLUMNS)] + [[cell(r, c) for c in COLUMNS] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.rjust(w) if i > 2 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def print_parameters(config_path, names: list[str] | None = None, log=print) -> list[dict]:
    """The parameter table of the study `config_path` (or of its experiments `names`), logged."""
    study = Study(cfg.load(config_path))
    unknown = [n for n in names or [] if n not in study.config["experiments"]]
    if unknown:
        raise UserError(
            f"--experiment {unknown[0]!r} is not in {config_path}; known: {', '.join(study.config['experiments'])}"
        )
    rows = parameter_rows(study, names)
    log(format_table(rows))
    log(
        "\nparams_M: parameters of the model as built (tied matrices counted once); "
        "paper_M: Table 3 of the paper, where it gives one."
    )
    return rows
