"""config.yaml and every other set of settings, checked against one schema and completed from its defaults.

The schema (workflow/schemas/config.schema.yaml) catches unknown keys and wrong types and holds
every default but the paper's §5.3-5.4 values (aiayn.study.paper.TRAINING, filled in when it is
read); `check()` catches what a schema cannot: references between sections (an experiment naming a
preset or dataset that does not exist, a dataset naming an unknown archive or eval set). The `*_diff`
definitions (an experiment's or preset's changes to a model, training or decoding) are derived from
their base definitions when the schema is read, so a setting is written once. `complete()` checks a
command's JSON settings (`--decode`, `--vocab`, `--cleaning`, `--settings` of table1) against the
same definitions and fills in the same defaults.
"""

from __future__ import annotations

import collections.abc
import contextlib
import copy
import functools
import math
import re
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from aiayn.errors import UserError
from aiayn.io import readable
from aiayn.study import paper
from aiayn.study.layout import RESERVED_NAMES

SCHEMA_FILE = "workflow/schemas/config.schema.yaml"
# definitions whose `<name>_diff` twin is derived: every key nullable, null meaning "inherit"
DIFFED = ("model", "train", "decode")


class ConfigError(UserError, ValueError):
    """A mistake in the user's configuration; the message names the key and what to do."""


@functools.cache
def _schema() -> dict:
    text = resources.files("aiayn").joinpath("config.schema.yaml").read_text(encoding="utf-8")
    schema_ = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 5 ms, not 43, each start
    for key, value in paper.TRAINING.items():  # the paper's §5.3-5.4 values: paper.py's, not the YAML's
        schema_["$defs"]["train"]["properties"][key]["default"] = value
    for name in DIFFED:
        schema_["$defs"][f"{name}_diff"] = _nullable(schema_["$defs"][name])
    return schema_


def schema() -> dict:
    """The JSON schema of config.yaml, the `*_diff` definitions derived (a copy: change it freely)."""
    return copy.deepcopy(_schema())


def _nullable(definition: dict) -> dict:
    """The changes to a `definition` object: each key may be null (inherit), its default null."""
    properties = {}
    for key, prop in definition["properties"].items():
        prop = dict(prop)
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        prop["type"] = [*types, "null"]
        if "enum" in prop:
            prop["enum"] = [*prop["enum"], None]
        prop["default"] = None
        properties[key] = prop
    return {"type": "object", "additionalProperties": False, "properties": properties}


def definition(*names: str) -> dict:
    """Kinds of settings of the schema, as one: each a `$defs` entry ("decode", "vocab", "train",
    ...) or a top-level property ("cleaning", "table1", "scoring"); several are one object of all
    their keys (the score command's --scoring: the study's `scoring` and a pair's)."""
    schema_ = _schema()
    merged: dict = {"$defs": schema_["$defs"], "type": "object", "additionalProperties": False, "properties": {}}
    for name in names:
        found = schema_["$defs"].get(name) or schema_["properties"].get(name)
        if found is None or "object" not in found.get("type", ()):
            raise KeyError(f"the schema defines no settings {name!r}")
        if len(names) == 1 and "properties" not in found:  # a map (archive_paths): the definition as it is
            return {"$defs": schema_["$defs"], **copy.deepcopy(found)}
        merged["properties"].update(copy.deepcopy(found["properties"]))
        merged["required"] = merged.get("required", []) + found.get("required", [])
        if len(names) == 1:
            merged["type"] = found["type"]
    return merged


FORMATS = jsonschema.FormatChecker(formats=())


def _validator(schema_: dict):
    """A validator of `schema_` that fills in `default` values while validating, whose integers are
    whole numbers written as such (2.0 is no beam size) and whose numbers are finite.

    Not `snakemake.utils.validate(..., set_default=True)`: `tables --config` and `params` load the
    config outside Snakemake, in environments without it (envs/report.yaml)."""
    base = jsonschema.validators.validator_for(schema_)
    validate_properties = base.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema_):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema_)

    types = base.TYPE_CHECKER.redefine_many(
        {
            "integer": lambda _, x: isinstance(x, int) and not isinstance(x, bool),
            # NaN and infinities (JSON's NaN, YAML's .nan / .inf) are no settings
            "number": lambda _, x: type(x) is int or (isinstance(x, float) and math.isfinite(x)),  # (int: finite)
        }
    )
    cls = jsonschema.validators.extend(base, {"properties": set_defaults}, type_checker=types)
    return cls(schema_, format_checker=FORMATS)


def _problems(schema_: dict, instance, sources: list[tuple[str, object]] = ()) -> list[str]:
    """Every way `instance` breaks `schema_` (defaults filled in on the way), one phrase each, by key
    path; with `sources` (what each config file or --config gave, merged in that order), the key
    path names the last of them that sets it."""

    def given(path: list) -> str:
        name = _setter(sources, path)
        return f" (in {name})" if name else ""

    errors = sorted(_validator(schema_).iter_errors(instance), key=lambda e: list(e.absolute_path))
    found = []
    for e in errors:
        path = list(e.absolute_path)
        where = ".".join(_key(p) for p in path)
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            known = e.schema.get("properties", {})
            for key in [k for k in e.instance if k not in known]:
                said = f"unknown key {key!r}{given([*path, key])}; known: {', '.join(known)}"
                found.append(f"{where}: {said}" if where else said)
            continue
        # a name refused by `propertyNames` is a key of `path`: the source that gave that name
        where += given([*path, e.instance] if "propertyNames" in e.absolute_schema_path else path)
        if e.validator == "type" and isinstance(e.instance, float) and not math.isfinite(e.instance):
            found.append(f"{where or '<top level>'}: {e.instance} is not a finite number")
        elif e.validator in ("pattern", "format") and e.schema.get("description"):  # the rule, not the regex
            found.append(f"{where or '<top level>'}: {e.instance!r} is not allowed: {e.schema['description'].strip()}")
        else:
            found.append(f"{where or '<top level>'}: {e.message}")
    return found


def _key(part) -> str:
    """A key of a key path as a message shows it: quoted when it holds white space or control
    characters (a key "\n" would break the message's one line)."""
    text = str(part)
    return text if text.isprintable() and not any(c.isspace() for c in text) and text else repr(text)


def _one_line(problems: list[str], limit: int = 10) -> str:
    more = f" (and {len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


def complete(names: str | tuple[str, ...], given: dict, where: str, *, partial: bool = False) -> dict:
    """`given` checked against the schema's settings `names` (one kind, or several as one) and
    completed with their defaults: how a command's JSON settings get theirs (`partial`: the keys
    the kind requires may be left out). A mistake raises ConfigError naming `where` (the option)
    and the key."""
    settings = copy.deepcopy(given)
    schema_ = definition(*([names] if isinstance(names, str) else names))
    if partial:
        schema_.pop("required", None)
    problems = _problems(schema_, settings)
    if problems:
        raise ConfigError(f"{where}: {_one_line(problems)}")
    return settings


def paths_in(names: str, value) -> list[tuple[str, str]]:
    """The paths of files the JSON `value` of the settings `names` (a kind, or several joined by +;
    a list of them for a settings list) names, where the schema marks them `x-path` ("file", or
    "unless archive": a path on disk only where the object names no archive), each with where it
    is (".src", "[0].model"): what aiayn.cli's guard counts among a command's inputs."""
    defs = _schema()["$defs"]

    def walk(node: dict, v, where: str) -> list[tuple[str, str]]:
        node = {**defs[node["$ref"].rsplit("/", 1)[-1]], **node} if "$ref" in node else node
        if node.get("x-path"):
            return [(where, p) for p in (v if isinstance(v, list) else [v]) if isinstance(p, str) and p]
        found = []
        if isinstance(v, dict):
            for key, item in v.items():
                extra = node.get("additionalProperties")
                sub = node.get("properties", {}).get(key) or (extra if isinstance(extra, dict) else None)
                if sub and not (sub.get("x-path") == "unless archive" and v.get("archive")):
                    found += walk(sub, item, f"{where}.{key}")
        elif isinstance(v, list) and isinstance(node.get("items"), dict):
            for i, item in enumerate(v):
                found += walk(node["items"], item, f"{where}[{i}]")
        return found

    kinds = [defs.get(name) or _schema()["properties"][name] for name in names.split("+")]
    items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
    found = {hit for kind in kinds for i, item in items for hit in walk(kind, item, "" if i is None else f"[{i}]")}
    return sorted(found)


def defaults(name: str) -> dict:
    """The schema's defaults of the settings `name` (e.g. "decode": beam 4, alpha 0.6, ...)."""
    return complete(name, {}, name)


def from_command_line(config: dict, given: dict) -> dict:
    """`config` with the values that `--config` gave (`given`: Snakemake's --config dict) read as
    YAML where the schema wants no string: Snakemake passes `--config training='{steps: 5}'` or
    `baselines=true` as strings, which the schema would refuse as "'5' is not of type 'integer'"."""
    config = copy.deepcopy(config)
    errors = _validator(_schema()).iter_errors(copy.deepcopy(config))
    for e in errors:
        path = list(e.absolute_path)
        if e.validator != "type" or not isinstance(e.instance, str) or not _has(given, path):
            continue
        try:
            value = loads(e.instance, f"--config {'.'.join(map(str, path))}")
        except yaml.YAMLError:
            continue
        node = config
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return config


def _read_values(given: dict) -> dict:
    """--config's values as `from_command_line` reads them (its strings as YAML, where they are)."""
    out = {}
    for key, value in given.items():
        try:
            out[key] = loads(value, "--config") if isinstance(value, str) else value
        except (yaml.YAMLError, ConfigError):
            out[key] = value
    return out


def _splits(text: str, trees: list) -> list[list]:
    """Every way to read the dotted `text` as a key path through `trees` (keys may hold dots); a
    path ends where the trees know no key that the rest of the text starts with."""
    known = {k for t in trees if isinstance(t, dict) for k in t if isinstance(k, str)}
    steps = [k for k in known if text == k or text.startswith(f"{k}.")]
    return [[k, *rest] for k in steps for rest in _splits(text[len(k) + 1 :], [t[k] for t in trees
            if isinstance(t, dict) and k in t]) or [[]]]  # fmt: skip


def _setter(sources: list[tuple[str, object]], path: list) -> str | None:
    """The last of `sources` (name, tree), in merge order, that sets the key `path`."""
    return next((name for name, tree in reversed(sources) if path and _has(tree, path)), None)


def _has(tree, path: list) -> bool:
    for key in path:
        if isinstance(tree, list) and not (isinstance(key, int) and 0 <= key < len(tree)):
            return False
        if not isinstance(tree, (dict, list)) or (isinstance(tree, dict) and key not in tree):
            return False
        tree = tree[key]
    return True


def validate(config: dict, files: list = (), given: dict | None = None) -> dict:
    """Validate `config` against the schema, fill in defaults, and run `check()`; return it. A
    mistake names its key, and the file of `files` (merged in that order) or the --config values
    (`given`) that set it."""
    config = copy.deepcopy(config)
    problems = _problems(_schema(), config)
    if problems and (files or given):
        problems = _problems(_schema(), copy.deepcopy(config), _sources(files, given))
    if problems:
        raise ConfigError(f"does not match {SCHEMA_FILE}: {_one_line(problems)}")
    with naming_sources(files, given):
        check(config)
    return config


def _sources(files: list, given: dict | None) -> list[tuple[str, object]]:
    """What each config file and --config gave, in the order they are merged."""
    return [(str(f), read_yaml(f)) for f in files] + [("--config", _read_values(given or {}))]


@contextlib.contextmanager
def naming_sources(files: list = (), given: dict | None = None):
    """A ConfigError raised inside that starts with a key path (`experiments.big.average: ...`, the
    cross-checks of `check` and aiayn.study.grid.Study) names the last of `files` or --config that
    sets that key; where none does (a value from a preset or a default), the longest part of the key
    one sets, and which: `experiments.big.train.steps (experiments.big in mine.yaml): ...`."""
    try:
        yield
    except ConfigError as exc:
        key = re.match(r"[A-Za-z_][\w.-]*(?=:)", str(exc))
        sources = _sources(files, given) if key and (files or given) else []
        # the key path the text spells: names may hold dots, so of every way to split it into keys
        # the sources know, the one whose longest part a source sets is longest, then has most keys
        splits = _splits(key[0], [tree for _, tree in sources]) if sources else []
        parts = [
            (len(".".join(p[:n])), len(p), p[:n])
            for p in splits
            for n in range(len(p), 0, -1)
            if _setter(sources, p[:n])
        ]
        if parts:
            part = max(parts, key=lambda x: x[:2])[2]
            said = "" if ".".join(part) == key[0] else f"{'.'.join(part)} "
            raise ConfigError(f"{key[0]} ({said}in {_setter(sources, part)}){str(exc)[key.end() :]}") from None
        raise


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key given twice in one mapping (yaml keeps the last one
    silently: a second `experiments.base` would replace the first without a word). Merge keys
    (`<<: *base`, YAML's way to share a block) are standard: what a merge brings may be overridden by
    a key written in the mapping itself; only keys written twice are refused."""

    def construct_object(self, node, deep=False):
        """A value yaml builds with Python's own constructors (`!!int x`, `!!timestamp 2001-13-45`, an
        int of 5,000 digits) fails with their exception: a YAML error at the value's line instead."""
        try:
            value = super().construct_object(node, deep)
            if isinstance(value, int) and value.bit_length() > 1024:  # past any float (`0x` and 300 f's)
                raise ValueError("a number too large to be a setting")
            return value
        except (yaml.YAMLError, RecursionError):
            raise
        except Exception as exc:  # (`!!bool x`: KeyError; `!!int ''`: IndexError)
            raise yaml.constructor.ConstructorError(None, None, f"cannot build {exc!r:.120}", node.start_mark) from None

    def construct_mapping(self, node, deep=False):
        if not isinstance(node, yaml.MappingNode):  # `!!set [1]`: yaml's own refuses it
            return super().construct_mapping(node, deep)
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, collections.abc.Hashable):
                break  # yaml's own construct_mapping refuses it ("found unhashable key")
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (first at line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


#: The most values a YAML document may expand to once its aliases are followed. config.yaml is about
#: 1,000; a document of a few aliases nested ("billion laughs") expands to billions, which json.dumps
#: of a rule's parameters or a deep copy would try to build.
MAX_YAML_VALUES = 1_000_000
#: The largest config file read: yaml's pure-Python parser takes about 20 s a megabyte of a flat list
MAX_YAML_BYTES = 256 * 1024


def _expanded_size(node, limit: int) -> int:
    """How many values `node` stands for with every alias followed, counted without expanding it;
    raises ValueError past `limit` or for a node that contains itself."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(n) -> int:
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise ValueError("an alias refers to a value that contains it")
        open_.add(key)
        if isinstance(n, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(v) for v in n.value)
        else:
            total = 1
        open_.discard(key)
        if total > limit:
            raise ValueError(f"it expands to more than {limit:,} values once its aliases are followed")
        sizes[key] = total
        return total

    return size(node)


def loads(text: str, name: str = "<string>"):
    """The value of the YAML document `text` as read_yaml reads it (duplicate keys refused, merge
    keys followed); a document that expands past MAX_YAML_VALUES or refers to itself is refused
    before it is built. Raises yaml.YAMLError for a syntax error, ConfigError for the rest."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, MAX_YAML_VALUES)
        return loader.construct_document(node)
    except (ValueError, RecursionError) as exc:  # (a document nested past Python's recursion limit too)
        message = str(exc) if isinstance(exc, ValueError) else "it nests too deeply"
        raise ConfigError(f"{name}: refused ({message}); write the values out or share fewer levels") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path):
    """A YAML file's content; a syntax error or a key given twice names the file, line and column;
    merge keys (`<<: *base`) are followed; a document that expands past MAX_YAML_VALUES values (an
    alias bomb) is refused before it is built."""
    path = readable(path, "a config file")
    if (size := path.stat().st_size) > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: {size:,} bytes, more than a config holds ({MAX_YAML_BYTES:,} at most; "
                          "config.yaml, the paper's whole study, is about 16,000): is it the right file?")  # fmt: skip
    try:
        return loads(path.read_text(encoding="utf-8"), str(path))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        raise ConfigError(f"{path}{where}: not valid YAML ({problem}{', ' + context if context else ''})") from None


def merged(paths: list[str | Path]) -> dict:
    """The config several files make, each read as `read_yaml` reads it and merged over the ones
    before it key by key, as Snakemake merges its --configfile files (a mapping is merged, any other
    value replaced). Not validated."""

    def merge(a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            return {**a, **{k: merge(a.get(k), v) for k, v in b.items()}}
        return b

    out: dict = {}
    for path in paths:
        data = read_yaml(path)
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings at the top level")
        out = merge(out, data)
    return out


def load(path: str | Path) -> dict:
    """Read, validate and complete a config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    data = merged([path])
    try:
        return validate(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def check(config: dict) -> None:
    """Cross-references the schema cannot express; raise ConfigError naming the key."""
    if (results := Path(str(config.get("results", "results")))).exists() and not results.is_dir():
        raise ConfigError(f"results: {results} is a file, where the study's results folder goes; give a folder")
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
