"""experiment.json, the resolved training settings of one experiment: the input of its training job.

The Snakemake rule `resolve` writes it from `Study.training_settings` (preset ←
experiment diff); `train` reads it. Only what shapes training is in it, so changing an
experiment's decoding or averaging retrains nothing, and changing one experiment's training
retrains only that experiment.
"""

from __future__ import annotations

import os

from aiayn.errors import UserError
from aiayn.io import parse_json, readable, write_json
from aiayn.model.hparams import ModelConfig
from aiayn.study import config

# key -> the type its value has
KEYS = {"name": str, "preset": str, "dataset": str, "task": str, "model": dict, "train": dict, "vocab": dict}


# the parts checked against the schema's definition of that name (and completed with its defaults)
CHECKED = {"model": "model", "train": "train", "vocab": "vocab"}


# settings an experiment.json of an earlier aiayn lacks, each read as its default, the setting those
# studies trained with (model.init arrived after 0.3.0, whose models were t2t's)
LATER = {"model": {"init"}}


def missing(settings: dict) -> list[str]:
    """The keys of KEYS that `settings` lacks or holds as another type."""
    return [k for k, kind in KEYS.items() if not isinstance(settings.get(k), kind)]


def incomplete(settings: dict) -> list[str]:
    """The settings (as `part.key`) that `resolve.write` always writes and `settings` lacks: what a
    damaged or hand-cut experiment.json misses, which a default would silently replace."""
    return [
        f"{part}.{key}"
        for part, name in CHECKED.items()
        for key in config.definition(name)["properties"]
        if key not in settings[part] and key not in LATER.get(part, ())
    ]


def checked(settings: dict, where: str) -> dict:
    """`settings` with its model, train and vocab parts checked against the schema as config.yaml's
    are (a value out of range or of the wrong type raises ConfigError naming `where` and the key),
    and the model against the rules of its shape (ModelConfig: an even width for sinusoids, ...)."""
    out = {**settings, **{k: config.complete(name, settings[k], f"{where}: {k}") for k, name in CHECKED.items()}}
    vocab = out["vocab"]
    try:
        ModelConfig.from_settings(
            out["model"], src_vocab=vocab["size"], tgt_vocab=vocab["size"], shared_vocab=vocab["shared"]
        )
    except ValueError as exc:
        raise config.ConfigError(f"{where}: model: {exc}") from None
    return out


def write(settings: dict, out: str | os.PathLike, *, where: str = "--settings") -> None:
    """Write one experiment's settings (as `Study.training_settings` gives them)."""
    lacking = missing(settings)
    if lacking:
        raise UserError(f"{where} lacks {', '.join(lacking)}")
    write_json(out, checked(settings, where))


def read(path: str | os.PathLike) -> dict:
    """The settings of experiment.json; a file that is not one names what it lacks, and a key it
    lacks is never filled with a default (but the LATER ones of an earlier aiayn's file)."""
    path = readable(path, "experiment settings (experiment.json)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the experiment settings ({exc})") from None
    try:
        settings = parse_json(text, finite=False)  # a NaN setting: the schema names its key
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    lacking = missing(settings) if isinstance(settings, dict) else list(KEYS)
    if lacking:
        raise UserError(
            f"{path}: the settings lack {', '.join(lacking)}; write them with `python -m aiayn resolve` "
            "(the resolve rule)"
        )
    cut = incomplete(settings)
    if cut:
        raise UserError(
            f"{path}: the settings lack {', '.join(cut)}, which the resolve rule always writes (a damaged or "
            "hand-edited file): write it again with `python -m aiayn resolve` (snakemake --forcerun resolve)"
        )
    return checked(settings, str(path))
