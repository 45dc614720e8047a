"""Every setting is checked by the one schema wherever it enters: config.yaml, and the JSON options
of every command, and experiment.json. The wrong values are generated from the schema itself
(for every key: a wrong type, each bound crossed, NaN, a value outside its enum or pattern) and
each is given to the command that reads it: exit 2, one line naming the option and the key."""

from __future__ import annotations

import copy
import json
import math
import re

import pytest
import toy
import yaml
from conftest import ROOT
from working import argv, prepare_world
from world import build_world

from aiayn import cli
from aiayn.study import config as cfg

# command, option, the schema's settings it holds (kinds): every JSON option the inventory binds to
# settings of the schema with keys of their own (aiayn.inventory)
OPTIONS = [
    (command, option, tuple(check.what.split("+")))
    for command in cli.COMMANDS
    for option, check in cli.options(command).items()
    if check.kind == "settings" and "properties" in cfg.definition(*check.what.split("+"))
]
EXPERIMENT_PARTS = {"model": "model", "train": "train", "vocab": "vocab"}  # experiment.json (resolve, train)


def wrong_values(prop: dict) -> list[tuple[str, object]]:
    """(what is wrong, a value) for one property of the schema: every way its definition says no."""
    types = prop.get("type", [])
    types = [types] if isinstance(types, str) else types
    out = [("a wrong type", 12345 if "string" in types else "twelve")]
    numeric = {"integer", "number"} & set(types)
    if numeric:
        step = 1 if "integer" in types else 0.5
        if "minimum" in prop:
            out.append(("below its minimum", prop["minimum"] - step))
        if "exclusiveMinimum" in prop:
            out.append(("at its exclusive minimum", prop["exclusiveMinimum"]))
        if "maximum" in prop:
            out.append(("above its maximum", prop["maximum"] + step))
        if "exclusiveMaximum" in prop:
            out.append(("at its exclusive maximum", prop["exclusiveMaximum"]))
        if "number" in types:
            out += [("NaN", math.nan), ("infinite", math.inf)]
        if types == ["integer"] or types == ["integer", "null"]:
            out.append(("a whole number written as a float", 2.0))
    if "enum" in prop:
        out.append(("outside its enum", "none-of-these"))
    if "pattern" in prop:
        out.append(("against its pattern", "a b;c$\n"))
    if "format" in prop:
        out.append(("against its format", "zz"))
    if prop.get("type") == "array" and "items" in prop:
        out += [(f"an item {what}", [value]) for what, value in wrong_values(prop["items"])[:1]]
    return out


def numbers(node, where: str = "") -> dict[str, dict]:
    """Every property of the schema that holds a number, by its path."""
    found = {}
    if isinstance(node, dict):
        types = node.get("type", [])
        if {"integer", "number"} & set([types] if isinstance(types, str) else types):
            found[where] = node
        for key, value in node.items():
            found |= numbers(value, f"{where}.{key}".lstrip("."))
    return found


def test_every_number_of_the_schema_has_a_range():
    """A negative perplexity or a BLEU of 140 is a typo the dry run refuses: each number a config may
    hold has a lower bound (an enum is one), and each BLEU or F1 (a percentage) an upper one of 100."""
    found = numbers(cfg._schema())
    assert len(found) > 50, sorted(found)
    assert [w for w, p in found.items() if not {"minimum", "exclusiveMinimum", "enum"} & set(p)] == []
    percent = [w for w, p in found.items() if re.search(r"(bleu|\bf1)$", w, re.I) and p.get("maximum") != 100]
    assert percent == []


def cases():
    for command, option, kinds in OPTIONS:
        props = cfg.definition(*kinds)["properties"]
        yield command, option, kinds, "an unknown key", "no_such_key", 1
        for key, prop in props.items():
            if "$ref" in prop or prop.get("type") == "object":
                continue  # a nested kind: its own definition is tested where it is an option
            for what, value in wrong_values(prop):
                yield command, option, kinds, what, key, value


CASES = list(cases())


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return prepare_world(build_world(tmp_path_factory.mktemp("world")))


@pytest.mark.parametrize(
    "command, option, kinds, what, key, value", CASES, ids=[f"{c[0]} {c[1]} {c[4]}: {c[3]}" for c in CASES]
)
def test_a_wrong_setting_gets_one_line_naming_option_and_key(
    command, option, kinds, what, key, value, world, tmp_path, capsys
):
    args = argv(command, world, tmp_path)
    given = json.loads(args[args.index(option) + 1]) if option in args else {}
    args = [a for i, a in enumerate(args) if not (a == option or (i and args[i - 1] == option))]
    given[key] = value
    code = cli.main([*args, option, json.dumps(given)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, (what, err)
    assert option in err[0] and key in err[0], (what, err)


EXPERIMENT_CASES = [
    (part, key, what, value)
    for part, kind in EXPERIMENT_PARTS.items()
    for key, prop in cfg.definition(kind)["properties"].items()
    for what, value in wrong_values(prop)
]


@pytest.mark.parametrize(
    "part, key, what, value", EXPERIMENT_CASES, ids=[f"{c[0]}.{c[1]}: {c[2]}" for c in EXPERIMENT_CASES]
)
def test_a_wrong_setting_in_experiment_json_is_named(part, key, what, value, tmp_path, capsys):
    """experiment.json, the training job's input: resolve refuses to write it, train to read it."""
    settings = copy.deepcopy(toy.settings())
    settings[part][key] = value
    text = json.dumps(settings)
    assert cli.main(["resolve", "--settings", text, "--out", str(tmp_path / "e.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{part}: {key}" in err[0], err
    (tmp_path / "e.json").write_text(text)
    toy.corpus(tmp_path / "train.bin")
    assert cli.main(["train", "--settings", str(tmp_path / "e.json"), "--train", str(tmp_path / "train.bin"),
                     "--checkpoints", str(tmp_path / "c"), "--out", str(tmp_path / "c/last.pt")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{part}: {key}" in err[0], err


def test_the_paper_config_with_each_key_wrong_is_refused_naming_it(paper_config):
    """config.yaml itself: each setting of `training` and `decoding` made wrong in every way."""
    for section, kind in (("training", "train"), ("decoding", "decode")):
        for key, prop in cfg.definition(kind)["properties"].items():
            for what, value in wrong_values(prop):
                config = copy.deepcopy(paper_config)
                config[section][key] = value
                with pytest.raises(cfg.ConfigError, match=f"{section}.{key}"):
                    cfg.validate(yaml.safe_load(yaml.safe_dump(config)))


def test_a_mistake_names_the_file_or_the_option_that_set_its_key(tmp_path):
    """Config files merged in order (config.yaml, then each --configfile) and --config's values: a
    wrong value or an unknown key names the last of them that sets it, as Snakemake's merge takes it."""
    first, second = tmp_path / "config.yaml", tmp_path / "mine.yaml"
    first.write_text((ROOT / "config.yaml").read_text().replace("warmup_steps: 4000", "warmup_steps: 0", 1))
    second.write_text("decoding: {beam: 0}\nexperiments:\n  base: {bogus: 1}\ntraining: {warmup_steps: 0}\n")
    given = {"baselines": "maybe"}
    config = {**cfg.merged([first, second]), **given}
    with pytest.raises(cfg.ConfigError) as refused:
        cfg.validate(cfg.from_command_line(config, given), files=[first, second], given=given)
    said = str(refused.value)
    phrases = ["decoding.beam (in {second}): 0 is less", "unknown key 'bogus' (in {second})",
               "training.warmup_steps (in {second}): 0 is less", "baselines (in --config): 'maybe' is not"]  # fmt: skip
    for phrase in phrases:
        assert phrase.format(second=second) in said, said
    first.write_text(first.read_text().replace("warmup_steps: 0", "warmup_steps: -1", 1))
    with pytest.raises(cfg.ConfigError, match=rf"training.warmup_steps \(in {re.escape(str(first))}\): -1"):
        cfg.validate(cfg.merged([first]), files=[first])


def test_a_cross_check_names_the_file_that_set_its_key_or_the_part_of_it(tmp_path):
    """Mistakes across keys (`check`, Study) name the file or --config too: the key where one sets it,
    else the longest part of it one sets. Names may hold dots (`foo` beside `foo.train`), and a name
    the schema refuses is the source's that gave that name."""
    from aiayn.study.grid import Study

    files = [tmp_path / "config.yaml", tmp_path / "mine.yaml", tmp_path / "later.yaml"]
    files[0].write_text((ROOT / "config.yaml").read_text())
    exp = "{preset: base, dataset: wmt14-en-de, tables: [2]"
    sets = "eval_sets: {t: {src: c, tgt: d}}"
    dataset = f"{{task: translation, src: en, tgt: de, train: [{{src: a, tgt: b}}], test: t, {sets}"
    cases = [
        ("experiments:\n  t3-D-drop0.0: {average: 500}\n", "", {},
         "experiments.t3-D-drop0.0.train.checkpoint_interval (experiments.t3-D-drop0.0 in {mine}): 100,000 updates"),
        ("experiments:\n  base-en-de: {preset: bse}\n", "", {}, "experiments.base-en-de.preset (in {mine}): unknown"),
        ("decoding: {beam: 4}\n", "", {"run": "[nosuch]"}, "run (in --config): unknown experiment 'nosuch'"),
        (f"experiments:\n  foo: {exp}, train: {{steps: 100, checkpoint_interval: 100}}}}\n",
         f"experiments:\n  foo.train: {exp}}}\n", {}, "experiments.foo.train.checkpoint_interval (in {mine}): 100 "),
        (f"datasets:\n  one: {dataset}, dev: nope}}\n", f"datasets:\n  one.dev: {dataset}, dev: t}}\n", {},
         "datasets.one.dev (in {mine}): 'nope' is not one of its eval_sets"),
        (f"experiments:\n  a b: {exp}}}\n", f"experiments:\n  zz: {exp}}}\n", {},
         "experiments (in {mine}): 'a b' is not allowed"),
    ]  # fmt: skip
    for mine, later, given, phrase in cases:
        files[1].write_text(mine)
        files[2].write_text(later or "{}\n")
        config = {**cfg.merged(files), **given}
        with pytest.raises(cfg.ConfigError) as refused:  # as workflow/rules/common.smk reads the study
            checked = cfg.validate(cfg.from_command_line(config, given), files=files, given=given)
            with cfg.naming_sources(files, given):
                Study(checked)
        assert phrase.format(mine=files[1]) in str(refused.value)


def test_a_key_given_twice_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("experiments:\n  base: {preset: base}\n  big: {preset: big}\n  base: {preset: big}\n")
    with pytest.raises(cfg.ConfigError, match=r"c.yaml, line 4, column 3: .*'base' is given twice \(first at line 2\)"):
        cfg.read_yaml(path)


def documented_merged_study() -> str:
    """docs/configuration.md's example of experiments sharing a block with a merge key."""
    text = (ROOT / "docs/configuration.md").read_text()
    blocks = [b.split("\n```", 1)[0] for b in text.split("```yaml\n")[1:]]
    found = [b for b in blocks if "<<: *shared" in b]
    assert len(found) == 1, "docs/configuration.md: the merge-key example is gone"
    return found[0] + "\n"


MERGED_STUDY = documented_merged_study()


def test_anchors_and_merge_keys_are_followed_and_may_be_overridden(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(MERGED_STUDY)
    experiments = cfg.read_yaml(path)["experiments"]
    assert experiments["mine-base"]["train"] == {"steps": 7500, "seed": 11}
    assert experiments["mine-ls0"] == {**experiments["mine-base"], "train": {"steps": 7500, "seed": 11, "eps_ls": 0.0}}


def test_a_study_that_shares_blocks_with_merge_keys_plans_as_written(tmp_path):
    """`<<: *shared` in a --configfile, through Snakemake's reading and ours: both experiments
    planned with the shared settings, eps_ls 0 only where the mapping overrides it."""
    from conftest import snakemake

    study = tmp_path / "study.yaml"
    study.write_text(MERGED_STUDY)
    run = snakemake("-n", "-p", "--cores", "1", "--configfile", str(study), cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    resolve = [line for line in run.stdout.splitlines() if "aiayn resolve" in line]
    ls0 = [line for line in resolve if "/mine-ls0/" in line]
    base = [line for line in resolve if "/mine-base/" in line]
    assert len(ls0) == len(base) == 1, resolve
    assert '"eps_ls": 0.0' in ls0[0] and '"eps_ls": 0.1' in base[0]
    assert all('"steps": 7500' in line and '"seed": 11' in line for line in ls0 + base)


def billion_laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text, why", [(billion_laughs(), "more than 1,000,000 values"),
                                       ("a: &a [1, *a]\n", "refers to a value that contains it")])  # fmt: skip
def test_a_document_that_expands_without_bound_is_refused_before_it_is_built(text, why, tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    with pytest.raises(cfg.ConfigError, match=f"bomb.yaml: refused \\(.*{why}"):
        cfg.read_yaml(path)


# every tag yaml's safe loader builds, each given what it cannot build, in each place a value may stand
BUILT = [tag for tag in yaml.SafeLoader.yaml_constructors if tag]
UNBUILDABLE = ["x", "''", "[1, [2]]", "{x: [1]}", "{[1]: 2}", "2001-13-45", "9" * 5000]
PLACES = ["a: !<{t}> {b}\n", "!<{t}> {b}\n", "a: [b, !<{t}> {b}]\n", "? !<{t}> {b}\n: 1\n"]


@pytest.mark.parametrize("tag", BUILT)
def test_a_value_yaml_cannot_build_is_refused_naming_the_file(tag, tmp_path):
    """yaml builds a tagged value with Python's own constructors (`!!bool x` is a KeyError, `!!int ''`
    an IndexError, a 5,000-digit int a ValueError) and a mapping key that is a mapping is unhashable:
    each is read, or refused as YAML naming the file, never another exception."""
    path = tmp_path / "c.yaml"
    for body in UNBUILDABLE:
        for place in PLACES:
            path.write_text(place.format(t=tag, b=body))
            try:
                cfg.read_yaml(path)
            except cfg.ConfigError as exc:
                assert str(exc).startswith(f"{path}, line ") and "\n" not in str(exc), exc


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "{a: " * 5000 + "1" + "}" * 5000,
                                  "".join(" " * i + "a:\n" for i in range(700)), "{ {preset: base}: 1 }"])  # fmt: skip
def test_a_document_nested_past_the_readers_depth_or_with_a_mapping_key_is_refused(text, tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(cfg.ConfigError, match=r"deep.yaml(, line 1, column 3)?: (refused|not valid YAML)"):
        cfg.read_yaml(path)


@pytest.mark.parametrize("text, why", [("a: 0x" + "f" * 300 + "\n", "a number too large to be a setting"),
                                       ("a: [" + "1, " * 100_000 + "1]\n", "bytes, more than a config")])  # fmt: skip
def test_a_number_past_any_float_or_a_file_past_any_config_is_refused(text, why, tmp_path):
    """A hexadecimal int of 300 digits was an OverflowError in the schema's number check (and of
    4,000 a ValueError quoting it); a file of a million values took 40 s and 720 MB to parse."""
    path = tmp_path / "big.yaml"
    path.write_text(text)
    with pytest.raises(cfg.ConfigError, match=f"big.yaml.*{why}"):
        cfg.read_yaml(path)


def test_an_int_past_any_float_given_for_a_number_is_checked_not_a_traceback():
    problems = cfg._problems(cfg.definition("decode"), {"alpha": 10**400})
    assert len(problems) == 1 and "alpha: 1000" in problems[0] and "maximum" in problems[0], problems


def test_a_pattern_refusal_is_one_line(paper_config):
    with pytest.raises(cfg.ConfigError) as caught:
        cfg.validate({**paper_config, "mirror": "abc"})
    assert "mirror" in str(caught.value) and str(caught.value) == str(caught.value).strip()


def test_an_alias_bomb_given_to_snakemake_ends_in_one_line(tmp_path):
    from conftest import snakemake

    path = tmp_path / "bomb.yaml"
    path.write_text(billion_laughs())
    run = snakemake("-n", "--cores", "1", "--configfile", str(path), cwd=ROOT, timeout=120)
    assert run.returncode != 0
    said = run.stdout + run.stderr
    assert "bomb.yaml: refused (it expands to more than 1,000,000 values" in said, said[-2000:]
    assert "Traceback" not in said


def test_numbers_of_the_command_line_are_read_as_numbers(paper_config):
    given = {"training": {"steps": "5000", "seed": "3"}, "baselines": "true", "results": "007"}
    config = copy.deepcopy(paper_config)
    for key, value in given.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    fixed = cfg.from_command_line(config, given)
    assert fixed["training"]["steps"] == 5000 and fixed["training"]["seed"] == 3 and fixed["baselines"] is True
    assert fixed["results"] == "007"  # the schema wants a string there: kept as typed


def test_tuned_settings_that_print_alike_are_refused(paper_config):
    from conftest import with_treebank

    from aiayn.study.grid import Study

    config = with_treebank(paper_config)
    config["experiments"]["parse-wsj"]["tune"] = {"P_drop": [0.3, 0.30000001]}
    with pytest.raises(cfg.ConfigError, match="are both candidate parse-wsj.tune-P_drop0.3"):
        Study(cfg.validate(config))


def test_numbers_of_the_command_line_reach_the_study():
    """As typed: `--config training='{"seed": 3}' baselines=true` plans the study with seed 3 (an
    integer in every experiment.json), not a refusal of the string '3'."""
    from conftest import snakemake

    run = snakemake("-n", "-p", "--cores", "1", "--config", 'training={"seed": 3}', "baselines=true", cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    resolve = [line for line in run.stdout.splitlines() if "aiayn resolve" in line]
    assert resolve and all('"seed": 3,' in line for line in resolve)


@pytest.mark.parametrize("results", ["-r", "a,b", "x{y}", "a\nb"])
def test_a_results_folder_no_command_can_be_given_is_refused_naming_the_key(paper_config, results, tmp_path):
    """`results` with a leading dash (every output path under it an option to the commands), a
    comma, braces or a line break: refused when the config is read, naming the key."""
    config = {**copy.deepcopy(paper_config), "results": results}
    with pytest.raises(cfg.ConfigError, match="results"):
        cfg.validate(config)
    cfg.validate({**config, "results": str(tmp_path / results)} if results == "-r" else paper_config)  # absolute: taken
