"""Loading and checking config.yaml.

The schema (workflow/schemas/config.schema.yaml) catches unknown keys and wrong types; `check()`
catches what a schema cannot: references between sections (an experiment naming a preset or
dataset that does not exist, a dataset naming an unknown archive or eval set).
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from aiayn.errors import UserError

# Names used for folders directly under results/; an experiment may not take them.
RESERVED_NAMES = frozenset({"data", "downloads", "tables", "logs", "benchmarks", "report", "demo"})


class ConfigError(UserError, ValueError):
    """A mistake in the user's configuration; the message names the key and what to do."""


def schema() -> dict:
    """The JSON schema of config.yaml."""
    text = resources.files("aiayn").joinpath("config.schema.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _with_defaults(validator_class):
    """A validator class that fills in `default` values while validating.

    Not `snakemake.utils.validate(..., set_default=True)`: `tables --config` and `params` load the
    config outside Snakemake, in environments without it (envs/report.yaml), and every error here
    names its key path (all of them, not the first), followed by the cross-checks of `check()`."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema_):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema_)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _path_of(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "<top level>"


def validate(config: dict) -> dict:
    """Validate `config` against the schema, fill in defaults, and run `check()`; return it."""
    config = copy.deepcopy(config)
    schema_ = schema()
    cls = _with_defaults(jsonschema.validators.validator_for(schema_))
    errors = sorted(cls(schema_).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        found = [f"{_path_of(e)}: {e.message}" for e in errors[:10]]
        more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
        raise ConfigError("does not match workflow/schemas/config.schema.yaml: " + "; ".join(found) + more)
    check(config)
    return config


def read_yaml(path: str | Path):
    """A YAML file's content; a syntax error names the file, line and column."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        raise ConfigError(f"{path}{where}: not valid YAML ({problem}{', ' + context if context else ''})") from None


def load(path: str | Path) -> dict:
    """Read, validate and complete a config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    try:
        return validate(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def check(config: dict) -> None:
    """Cross-references the schema cannot express; raise ConfigError naming the key."""
    archives = config.get("archives", {})
    for name, archive in archives.items():
        if not archive.get("generate") and not (archive.get("url") and archive.get("sha256")):
            raise ConfigError(f"archives.{name}: needs url and sha256 (or generate)")
    datasets = config.get("datasets", {})
    presets = config.get("presets", {})
    for name, ds in datasets.items():
        _check_dataset(name, ds, archives)
    unknown = [n for n in config.get("run") or [] if n not in config.get("experiments", {})]
    if unknown:
        raise ConfigError(f"run: unknown experiment {unknown[0]!r}; known: {', '.join(config.get('experiments', {}))}")
    for name, exp in config.get("experiments", {}).items():
        where = f"experiments.{name}"
        if name in RESERVED_NAMES:
            raise ConfigError(f"{where}: the name is reserved for a results/ folder; choose another")
        if exp["preset"] not in presets:
            raise ConfigError(
                f"{where}.preset: unknown preset {exp['preset']!r}; known: {', '.join(sorted(presets)) or 'none'}"
            )
        if exp["dataset"] not in datasets:
            raise ConfigError(
                f"{where}.dataset: unknown dataset {exp['dataset']!r}; known: {', '.join(sorted(datasets)) or 'none'}"
            )
        task = datasets[exp["dataset"]]["task"]
        if 4 in exp["tables"] and task != "parsing":
            raise ConfigError(f"{where}.tables: Table 4 needs a parsing dataset, {exp['dataset']!r} is {task}")
        if {2, 3} & set(exp["tables"]) and task != "translation":
            raise ConfigError(
                f"{where}.tables: Tables 2 and 3 need a translation dataset, {exp['dataset']!r} is {task}"
            )
        if {3, 4} & set(exp["tables"]) and not exp.get("row"):
            raise ConfigError(f"{where}.row: an experiment of Table 3 or 4 needs its row label")


def _check_dataset(name: str, ds: dict, archives: dict) -> None:
    where = f"datasets.{name}"
    for key in ("dev", "test"):
        if ds[key] not in ds["eval_sets"]:
            raise ConfigError(f"{where}.{key}: {ds[key]!r} is not one of its eval_sets")
    if ds.get("semi_supervised") and ds["task"] != "parsing":
        raise ConfigError(f"{where}.semi_supervised: only a parsing dataset can be semi-supervised")
    if ds["task"] == "translation":
        if not ds["train"]:
            raise ConfigError(f"{where}.train: a translation dataset needs at least one training corpus")
        members = [("train", m) for m in ds["train"]]
        for set_name, es in ds["eval_sets"].items():
            if not (es.get("src") and es.get("tgt")):
                raise ConfigError(
                    f"{where}.eval_sets.{set_name}: a translation eval set needs src and tgt (and an archive, "
                    "or none for files on disk)"
                )
            members.append((f"eval_sets.{set_name}", es))
        for key, member in members:
            if member.get("archive") and member["archive"] not in archives:
                raise ConfigError(f"{where}.{key}: unknown archive {member['archive']!r}; define it under `archives`")
            if not member.get("archive") and not (member.get("src") and member.get("tgt")):
                raise ConfigError(f"{where}.{key}: without an archive, src and tgt are the files on disk")
    else:
        if ds.get("treebank_archive") and ds["treebank_archive"] not in archives:
            raise ConfigError(f"{where}.treebank_archive: unknown archive {ds['treebank_archive']!r}")
        for set_name, es in ds["eval_sets"].items():
            if not es.get("sections"):
                raise ConfigError(f"{where}.eval_sets.{set_name}: a parsing eval set needs `sections`")
        if not ds["train_sections"]:
            raise ConfigError(f"{where}.train_sections: a parsing dataset needs training sections")
