"""config.yaml and its schema: every key documented, mistakes caught with a message naming the key."""

from __future__ import annotations

import ast
import copy
import io
import re
import tokenize
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from aiayn.study import config as cfg
from aiayn.study import paper
from aiayn.study.config import ConfigError


def _properties(node, path="$"):
    """Yield (path, name, property schema) for every property anywhere in the schema."""
    if isinstance(node, dict):
        for name, sub in node.get("properties", {}).items():
            yield f"{path}.{name}", name, sub
        for key, sub in node.items():
            yield from _properties(sub, f"{path}.{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _properties(sub, f"{path}[{i}]")


def test_every_schema_key_has_description_and_default():
    props = list(_properties(cfg.schema()))
    assert len(props) > 100
    undocumented = [p for p, _, s in props if "description" not in s or "default" not in s]
    assert undocumented == []


def test_every_object_rejects_unknown_keys():
    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                yield node
            for sub in node.values():
                yield from objects(sub)
        elif isinstance(node, list):
            for sub in node:
                yield from objects(sub)

    found = list(objects(cfg.schema()))
    assert found and all(o.get("additionalProperties") is False for o in found)


def test_paper_config_is_valid_and_gets_defaults(paper_config):
    config = cfg.validate(paper_config)
    assert config["experiments"]["t3-A-h1"]["model"]["h"] == 1
    assert config["presets"]["base"]["model"]["pre_norm"] is False  # filled from the schema default
    assert config["datasets"]["wmt14-en-de"]["eval_sets"]["newstest2014"]["lines"] == 3003


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda c: c["training"].update(warmup_step=4000), "training: unknown key 'warmup_step'"),
        (
            lambda c: c["experiments"]["base-en-de"].setdefault("model", {}).update(dmodel=512),
            "experiments.base-en-de.model: unknown key 'dmodel'",
        ),
        (lambda c: c.update(experiment={}), "unknown key 'experiment'; known: results,"),
        (lambda c: c["training"].update(steps="many"), "training.steps: 'many' is not of type 'integer'"),
        (lambda c: c["decoding"].update(beam=0), "decoding.beam: 0 is less than the minimum of 1"),
        (
            lambda c: c["experiments"]["base-en-de"].update(preset="bse"),
            "experiments.base-en-de.preset: unknown preset 'bse'",
        ),
        (
            lambda c: c["experiments"]["big-en-fr"].update(dataset="wmt14-en-es"),
            "experiments.big-en-fr.dataset: unknown dataset",
        ),
        (lambda c: c["datasets"]["wmt14-en-de"]["train"][0].update(archive="europarl"), "unknown archive 'europarl'"),
        (
            lambda c: c["datasets"]["wmt14-en-de"].update(test="newstest2015"),
            "datasets.wmt14-en-de.test: 'newstest2015'",
        ),
        (
            lambda c: c["experiments"].update(tables={"preset": "base", "dataset": "wsj", "tables": [4], "row": "x"}),
            "reserved",
        ),
        (lambda c: c["experiments"]["t3-C-N2"].update(row=None), "experiments.t3-C-N2.row"),
        (lambda c: c["experiments"]["parse-wsj"].update(tables=[2]), "Tables 2 and 3 need a translation dataset"),
        (lambda c: c["archives"]["dev"].update(sha256="abc"), "archives.dev.sha256"),
        (lambda c: c.update(mirror="htps://mirror.example/wmt/"), "mirror: 'htps://mirror.example/wmt/' is not"),
        (lambda c: c.update(results=str(ROOT / "README.md")), "README.md is a file, where the study's results folder"),
        (lambda c: c["experiments"].update({"x" * 101: c["experiments"]["base-en-de"]}), f"'{'x' * 101}' is too long"),
        (
            lambda c: c["experiments"].update({"run" + "ab" * 20: c["experiments"]["base-en-de"]}),
            "not ending in a part repeated 20 times",
        ),
    ],
)
def test_mistakes_name_the_key(paper_config, mutate, fragment):
    config = copy.deepcopy(paper_config)
    mutate(config)
    with pytest.raises(ConfigError) as err:
        cfg.validate(config)
    assert fragment in str(err.value)


def test_load_names_the_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="nope.yaml: config file not found"):
        cfg.load(missing)
    bad = tmp_path / "bad.yaml"
    bad.write_text("training: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml, line 2, column 1: not valid YAML"):
        cfg.load(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("traning: {}\n")
    with pytest.raises(ConfigError, match=r"typo.yaml: .*: unknown key 'traning'"):
        cfg.load(typo)


def test_the_schema_leaves_the_papers_training_values_to_paper_py():
    """§5.3-5.4's values have one home, aiayn.study.paper: the schema's YAML gives none of them,
    and the schema as read has paper.py's as their defaults; its other defaults that are the paper's
    (the base model, §5.1-5.2's updates, §6.1's decoding) agree with paper.py."""
    raw = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    train = raw["$defs"]["train"]["properties"]
    assert [key for key in paper.TRAINING if "default" in train[key]] == []
    assert cfg.defaults("train").items() >= paper.TRAINING.items()
    # the defaults that are the paper's base model and its decoding stay in the schema, checked here
    model = cfg.defaults("model")
    assert {k: v for k, v in paper.MODEL["base"].items() if k in model}.items() <= model.items()
    assert cfg.defaults("train").items() >= paper.TRAIN["base"].items()
    assert cfg.defaults("decode") == paper.DECODE["translation"]


def test_config_yaml_states_the_papers_values_as_paper_py(paper_config):
    """config.yaml cites the paper's values beside each (the design card); they are checked against
    their one home, aiayn.study.paper."""
    assert {k: paper_config["training"][k] for k in paper.TRAINING} == paper.TRAINING
    stated = {name: exp["paper"] for name, exp in paper_config["experiments"].items() if "paper" in exp}
    assert stated == paper.FIGURES
    for preset in ("base", "big"):
        model = paper_config["presets"][preset]["model"]
        assert {k: v for k, v in paper.MODEL[preset].items() if k in model} == {
            k: v for k, v in model.items() if k in paper.MODEL[preset]
        }
    assert paper_config["decoding"] == paper.DECODE["translation"]


# The paper's distinctive numbers, compared by value with every number the package's code writes
# (1e-09, .98, 4e3 and 4_000 alike): Adam's beta2, the warmup, §5.1's tokens and vocabulary, §5.2's
# updates, the big model's dropout, the base model's d_ff, and every figure of Tables 2-4 with decimals (read
# from paper.py itself; not 5.0). Adam's epsilon, 1e-9, is also a tolerance: by its name (eps...).
FIGURE_VALUES = {
    v
    for v in [*(f for fs in paper.FIGURES.values() for f in fs.values()), *(c for r in paper.TABLE2 for c in r[1:3])]
    + [r[2] for r in paper.TABLE4]
    if isinstance(v, float) and v != int(v)
}
PAPER_VALUES = FIGURE_VALUES | {
    paper.TRAINING["adam_beta2"],
    paper.TRAINING["warmup_steps"],
    paper.TRAIN["base"]["tokens_per_update"],
    paper.TRAIN["big"]["steps"],
    paper.VOCAB_EN_DE,
    paper.MODEL["big"]["P_drop"],
    paper.MODEL["base"]["d_ff"],
}  # not 1024 nor 4096 (the big model's d_model, d_ff): KiB, MiB and token budgets are powers of two too
EPS = re.compile(r"eps\w*['\"]?\s*[=:]\s*$", re.IGNORECASE)


def paper_numbers_outside_paper_py(root: Path) -> list[str]:
    """Each number in the package's code, but study/paper.py, that is one of the paper's (by value)."""
    found = []
    for path in sorted((root / "src/aiayn").rglob("*.py")):
        if path.relative_to(root).as_posix() == "src/aiayn/study/paper.py":
            continue
        source = path.read_text(encoding="utf-8")
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.NUMBER or tok.string[-1] in "jJ":
                continue
            value = ast.literal_eval(tok.string)
            if value in PAPER_VALUES or (value == 1e-9 and EPS.search(tok.line[: tok.start[1]])):
                found.append(f"{path.relative_to(root)}:{tok.start[0]}: {tok.line.strip()}")
    return found


def test_the_papers_numbers_live_in_paper_py_only():
    assert len(FIGURE_VALUES) > 40 and 41.8 in FIGURE_VALUES
    assert paper_numbers_outside_paper_py(ROOT) == []
