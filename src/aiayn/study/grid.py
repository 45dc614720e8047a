"""The experiment grid of the study: which models are trained, averaged, decoded and scored.

A `Study` is built from a validated config. It resolves every experiment (defaults ← preset ←
experiment diff) and plans the evaluations of Tables 2-4 (§6.1, §6.3):

- Table 2: the test set (newstest2014), decoded from the average of the last K checkpoints;
- Table 3: the dev set (newstest2013), decoded from the final checkpoint, no averaging;
- Table 4: the test set (WSJ 23), decoded from the averaged model if the preset averages, else the final one.

It also answers what each rule needs to know of an experiment (its scoring, candidates, model
card, expected lines), with file names from `Layout`, so that the rules stay glue.
"""

from __future__ import annotations

import copy
import itertools
import os
from dataclasses import dataclass

from aiayn.model.hparams import ModelConfig
from aiayn.study import resolve as experiment_json
from aiayn.study.config import ConfigError
from aiayn.study.layout import Layout, archive_filename

# what `table_spec` says of each experiment of a table (the tables command's --experiments), and
# `replicates` (its runs, one per seed), which a hand-made spec may leave out (one run)
TABLE_SPEC_KEYS = ("name", "row", "dataset", "testset", "model", "eps_ls", "steps", "average", "paper", "scoring",
                   "preset", "task", "pair", "train", "decode")  # fmt: skip


@dataclass(frozen=True)
class Evaluation:
    """One decoding + scoring job: `experiment` decoded on `testset` from `model` ("average" or "final")."""

    experiment: str
    testset: str
    model: str


def _merge(base: dict, diff: dict | None) -> dict:
    """`base` updated by the non-null values of `diff` (null = inherit)."""
    out = dict(base)
    out.update({k: v for k, v in (diff or {}).items() if v is not None})
    return out


def _run_of(exp: dict, name: str, **changed) -> dict:
    """A run derived from experiment `exp` (an extra seed, a tuning candidate), named `name`, reported
    in no table of its own (no row, no paper figures), with the `changed` settings."""
    return {**copy.deepcopy(exp), "name": name, "tables": [], "row": None, "paper": {}, **changed}


class Study:
    """The experiments of a validated config and what each of them needs."""

    def __init__(self, config: dict):
        self.config = config
        self.layout = Layout(config["results"])
        # experiments that cannot run as configured, with the reason; left out of every target
        self.skipped: dict[str, str] = {n: r for n in config["experiments"] if (r := self._cannot_run(n))}
        chosen = config.get("run") or list(config["experiments"])  # `run:` picks some experiments
        self.experiments: dict[str, dict] = {}
        for name in config["experiments"]:
            if name not in self.skipped and name in chosen:
                self.experiments[name] = exp = self._resolve(name)
                for candidate in self._candidates(exp):
                    self.experiments[candidate["name"]] = candidate
                for replicate in self._replicates(exp):
                    self.experiments[replicate["name"]] = replicate

    # -- seeds (replicates of one row) -------------------------------------------------------------
    def _replicates(self, exp: dict) -> list[dict]:
        """One more training per extra seed of the experiment's `seeds` (or the study's), named
        `<name>.seed-<s>`, decoded and scored as the experiment is, reported in its row. The
        experiment itself is the replicate of its own `train.seed` (so a run trained before seeds
        were added is kept), or of the first seed listed if that one is not among them."""
        where = f"experiments.{exp['name']}.seeds"
        own = list(self.config["experiments"][exp["name"]].get("seeds") or [])
        if own and exp.get("candidates"):
            raise ConfigError(
                f"{where}: a selected experiment (tune) trains one candidate per setting, with one seed; "
                "give seeds to an experiment without a tune grid"
            )
        # the study-wide seeds apply to every experiment without a tune grid
        seeds = own or ([] if exp.get("candidates") else list(self.config.get("seeds") or []))
        if not seeds:
            seeds = [exp["train"]["seed"]]
        if exp["train"]["seed"] not in seeds:
            exp["train"]["seed"] = seeds[0]
        exp["seeds"] = seeds
        out = []
        for seed in seeds:
            if seed == exp["train"]["seed"]:
                continue
            if f"{exp['name']}.seed-{seed}" in self.config["experiments"]:
                raise ConfigError(
                    f"{where}: seed {seed}'s run would be named {exp['name']}.seed-{seed}, an experiment of "
                    "its own in this config; rename that experiment"
                )
            out.append(_run_of(exp, f"{exp['name']}.seed-{seed}", train={**exp["train"], "seed": seed},
                               replicate_of=exp["name"]))  # fmt: skip
        exp["replicates"] = [exp["name"] if s == exp["train"]["seed"] else f"{exp['name']}.seed-{s}" for s in seeds]
        return out

    # -- selection on the dev set (§6.3) ---------------------------------------------------------
    def _candidates(self, exp: dict) -> list[dict]:
        """One experiment per combination of the experiment's `tune` grid, named `<name>.tune-<values>`:
        trained, decoded and scored on the dev set, reported in no table."""
        tune = {k: v for k, v in (self.config["experiments"][exp["name"]].get("tune") or {}).items() if v}
        if not tune:
            return []
        where = f"experiments.{exp['name']}.tune"
        if exp["average"] != 1:
            raise ConfigError(
                f"{where}: a selected experiment decodes its best candidate's final checkpoint; set average: 1"
            )
        out, names = [], {}
        for values in itertools.product(*tune.values()):
            setting = dict(zip(tune, values))
            name = exp["name"] + ".tune-" + "-".join(f"{k}{v:g}" for k, v in setting.items())
            if name in names:  # two values print alike (0.3 and 0.3, or 0.3 and 0.30000001): one candidate
                raise ConfigError(
                    f"{where}: the combinations {names[name]} and {setting} are both candidate {name}; "
                    "give each tuned setting distinct values"
                )
            names[name] = setting
            model = {**exp["model"], **{k: v for k, v in setting.items() if k in exp["model"]}}
            train = {**exp["train"], **{k: v for k, v in setting.items() if k in exp["train"]}}
            out.append(_run_of(exp, name, model=model, train=train, tuned=setting, selects_for=exp["name"]))
        exp["candidates"] = [c["name"] for c in out]
        exp["tune"] = dict(tune)
        return out

    @property
    def trained(self) -> list[str]:
        """Experiments with a training job of their own (a selected one takes its best candidate's model)."""
        return [n for n, e in self.experiments.items() if not e.get("candidates")]

    @property
    def selected(self) -> list[str]:
        """Experiments whose model is the best candidate of their tuning grid."""
        return [n for n, e in self.experiments.items() if e.get("candidates")]

    @property
    def reported(self) -> list[str]:
        """Experiments of some table (not the selection candidates, not the extra seeds of a row)."""
        return [n for n, e in self.experiments.items() if e["tables"]]

    def replicates(self, experiment: str) -> list[str]:
        """The runs of `experiment`'s row, one per seed in the order of its `seeds` (itself alone
        without seeds)."""
        return list(self.experiment(experiment).get("replicates") or [experiment])

    def _cannot_run(self, name: str) -> str | None:
        ds_name = self.config["experiments"][name]["dataset"]
        ds = self.config["datasets"][ds_name]
        if ds["task"] == "parsing" and not ds.get("treebank") and not ds.get("treebank_archive"):
            return (
                f"experiments.{name} is left out: datasets.{ds_name}.treebank is not set; the parsing "
                "experiments (Table 4) need your licensed copy of the Penn Treebank 3 (LDC99T42): set it to "
                "the folder holding parsed/mrg/wsj"
            )
        if ds.get("semi_supervised") and not ds.get("extra_corpora"):
            return (
                f"experiments.{name} is left out: datasets.{ds_name} is semi-supervised (§6.3) but its "
                "extra_corpora is empty; list your extra parsed corpora there (one bracketed tree per line) "
                "to train it (it would otherwise train on WSJ alone)"
            )
        return None

    # -- experiments -------------------------------------------------------------------------
    def _resolve(self, name: str) -> dict:
        exp = self.config["experiments"][name]
        preset = self.config["presets"][exp["preset"]]
        dataset = self.config["datasets"][exp["dataset"]]
        model = _merge(preset["model"], exp.get("model"))
        train = _merge(_merge(self.config["training"], preset.get("train")), exp.get("train"))
        decode = _merge(_merge(self.config["decoding"], preset.get("decode")), exp.get("decode"))
        average = exp.get("average") or preset["average"]
        where = f"experiments.{name}"
        if train["keep_checkpoints"] is not None and average > train["keep_checkpoints"]:
            raise ConfigError(
                f"{where}: averages {average} checkpoints but keeps only {train['keep_checkpoints']} "
                "(training.keep_checkpoints); keep at least as many as are averaged"
            )
        on_grid = -(-train["steps"] // train["checkpoint_interval"])  # every interval, and the final step
        if average > on_grid:
            raise ConfigError(
                f"{where}.train.checkpoint_interval: {train['steps']:,} updates every {train['checkpoint_interval']:,} "
                f"make {on_grid} checkpoint(s), {average} are averaged; lower checkpoint_interval (or average)"
            )
        vocab = dataset["vocab"]
        try:  # every rule of the model's shape, checked where the mistake can name its key
            ModelConfig.from_settings(
                model, src_vocab=vocab["size"], tgt_vocab=vocab["size"], shared_vocab=vocab["shared"]
            )
        except ValueError as exc:
            raise ConfigError(f"{where}.model: {exc}") from None
        return {
            "name": name,
            "preset": exp["preset"],
            "dataset": exp["dataset"],
            "task": dataset["task"],
            "tables": sorted(exp["tables"]),
            "row": exp.get("row"),
            "model": model,
            "train": train,
            "decode": decode,
            "average": average,
            "vocab": copy.deepcopy(dataset["vocab"]),
            "paper": {k: v for k, v in exp.get("paper", {}).items() if v is not None},
        }

    def configured(self, name: str) -> dict:
        """The resolved settings of any experiment of the config, one left out (`skipped`) included."""
        return self.experiments.get(name) or self._resolve(name)

    def experiment(self, name: str) -> dict:
        if name in self.skipped:
            raise ConfigError(self.skipped[name])
        try:
            return self.experiments[name]
        except KeyError:
            raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(self.experiments)}") from None

    def training_settings(self, name: str) -> dict:
        """What training depends on, and nothing else: decoding or averaging changes retrain nothing
        (keep_checkpoints, null in the config, is resolved to what the run's averaging reads:
        `averaged`)."""
        exp = self.experiment(name)
        settings = {k: copy.deepcopy(exp[k]) for k in experiment_json.KEYS}
        if settings["train"]["keep_checkpoints"] is None:
            settings["train"]["keep_checkpoints"] = self.averaged(name)
        return settings

    def plan_spec(self) -> list[dict]:
        """What `python -m aiayn plan` needs of every training: its training settings."""
        return [self.training_settings(name) for name in self.trained]

    def averaged(self, name: str) -> int:
        """How many step checkpoints of `name` a decoding averages: its `average` where a table decodes
        its averaged model, else 0 (only its final model is decoded: a Table 3 row, a candidate)."""
        averaging = any(ev.experiment == name and ev.model == "average" for ev in self.evaluations())
        return self.experiment(name)["average"] if averaging else 0

    def why_no_table(self, table: int) -> str | None:
        """Why Table `table` has nothing to run (its experiments all left out), or None."""
        if any(table in e["tables"] for e in self.experiments.values()):
            return None
        left_out = [
            self.skipped[n]
            for n, e in self.config["experiments"].items()
            if n in self.skipped and table in e.get("tables", [])
        ]
        return "; ".join([f"Table {table}: no experiment of it runs as configured", *left_out])

    def in_table(self, table: int) -> list[str]:
        """Experiments reported in Table `table`, in config order."""
        return [n for n, e in self.experiments.items() if table in e["tables"]]

    def dataset(self, name: str) -> dict:
        return self.config["datasets"][name]

    def datasets(self, task: str | None = None) -> list[str]:
        """Datasets some experiment trains on (optionally of one task), in config order."""
        used = {e["dataset"] for e in self.experiments.values()}
        return [n for n, d in self.config["datasets"].items() if n in used and task in (None, d["task"])]

    def dev_set(self, experiment: str) -> str:
        return self.dataset(self.experiment(experiment)["dataset"])["dev"]

    def test_set(self, experiment: str) -> str:
        return self.dataset(self.experiment(experiment)["dataset"])["test"]

    # -- what the rules pass to their commands ---------------------------------------------------
    def scoring(self, dataset: str) -> dict:
        """How `dataset`'s translations are scored: the study's `scoring` with the dataset's own over it."""
        return {**self.config["scoring"], **self.dataset(dataset).get("scoring", {})}

    def bleu_scoring(self, dataset: str) -> dict:
        """How BLEU is computed on `dataset`: the keyword arguments of `aiayn.evaluation.score.bleu_scores`."""
        scoring = self.scoring(dataset)
        return {k: scoring[k] for k in ("moses_lang", "compound_split", "sacrebleu_tokenize", "reference")}

    def expected_lines(self, experiment: str, testset: str) -> int | None:
        """The number of lines `testset` must have (guards against a partial or filtered set), if
        configured: its `lines`, or its `first` where it takes only those."""
        spec = self.dataset(self.experiment(experiment)["dataset"])["eval_sets"][testset]
        if spec.get("first") and spec.get("lines"):
            return min(spec["first"], spec["lines"])
        return spec.get("first") or spec.get("lines")

    def target_lang(self, experiment: str) -> str:
        """The suffix of its decoded files: the target language, or "trees" for parses."""
        ds = self.dataset(self.experiment(experiment)["dataset"])
        return ds["tgt"] if ds["task"] == "translation" else "trees"

    def reference_side(self, experiment: str) -> str:
        """Translations are scored against the target text, parses against the gold trees."""
        return "tgt" if self.experiment(experiment)["task"] == "translation" else "gold"

    def treebank_settings(self, dataset: str) -> dict:
        """What preparing a parsing dataset depends on (its vocabulary is not part of it)."""
        keys = ("treebank", "treebank_archive", "train_sections", "eval_sets", "extra_corpora", "pos_tags")
        return {k: self.dataset(dataset).get(k) for k in keys}

    def table_scores(self, table: int) -> list[str]:
        """The score files Table `table` reads; a table none of whose experiments runs raises the reason."""
        reason = self.why_no_table(table)
        if reason:
            raise ConfigError(reason)
        return [self.layout.score(e.experiment, e.testset) for e in self.evaluations(table)]

    def candidates(self, experiment: str) -> list[dict]:
        """What the select command compares: each candidate's setting, dev score, model and metrics."""
        dev = self.dev_set(experiment)
        return [
            {
                "name": c,
                "setting": self.experiment(c)["tuned"],
                "score": self.layout.score(c, dev),
                "model": self.layout.final_checkpoint(c),
                "metrics": self.layout.metrics(c),
            }
            for c in self.experiment(experiment)["candidates"]
        ]

    def model_card(self, experiment: str) -> dict:
        """What an exported model's card says of its run (aiayn.evaluation.export.model_card)."""
        exp = self.experiment(experiment)
        ds = self.dataset(exp["dataset"])
        return {
            "name": experiment,
            "dataset": exp["dataset"],
            "pair": [ds.get("src"), ds.get("tgt")],
            "testset": ds["test"],
            "paper_bleu": exp["paper"].get("bleu"),
            "score": self.layout.score(experiment, ds["test"]),
            "metrics": self.layout.metrics(experiment),  # written by the training, beside its checkpoints
        }

    def evaluation_chain(self, experiment: str, testset: str) -> dict | None:
        """What the score step compares with the paper's row (aiayn.study.paper.chain_line): the
        table whose row scores `experiment` on `testset`, and the run's decoding, averaging and BLEU
        tokenization; None for a decoding no table reports (a tuning candidate's)."""
        for table in (2, 3, 4):
            ev = next((e for e in self.evaluations(table) if (e.experiment, e.testset) == (experiment, testset)), None)
            if ev is None:
                continue
            exp = self.experiment(experiment)
            return {
                "name": experiment,
                "table": table,
                "preset": exp["preset"],
                "task": exp["task"],
                "pair": [self.dataset(exp["dataset"]).get(s) for s in ("src", "tgt")],
                "decode": exp["decode"],
                "average": exp["average"] if ev.model == "average" else 1,
                "scoring": self.bleu_scoring(exp["dataset"]),
            }
        return None

    # -- evaluations -------------------------------------------------------------------------
    def evaluations(self, table: int | None = None) -> list[Evaluation]:
        """Every (experiment, test set, model) decoded for `table` (or for any table), without repeats."""
        plan: dict[tuple[str, str], Evaluation] = {}
        for name, exp in self.experiments.items():
            ds = self.dataset(exp["dataset"])
            averaged = "average" if exp["average"] > 1 else "final"
            wanted = {2: (ds["test"], averaged), 3: (ds["dev"], "final"), 4: (ds["test"], averaged)}
            if exp.get("selects_for") and table is None:  # a candidate: scored on the dev set only
                plan.setdefault((name, ds["dev"]), Evaluation(name, ds["dev"], "final"))
            # an extra seed is evaluated as its row's experiment is
            tables = self.experiments[exp["replicate_of"]]["tables"] if exp.get("replicate_of") else exp["tables"]
            for t in tables:
                if table in (None, t):
                    testset, model = wanted[t]
                    plan.setdefault((name, testset), Evaluation(name, testset, model))
        return list(plan.values())

    def table_spec(self, table: int) -> list[dict]:
        """What the tables command needs to know of each experiment of `table` (and nothing that would
        make a table rebuild when, say, a decoding setting of another table changes). Under `run:`,
        the table's other experiments too, marked `outside_run` (the table shows those that have
        finished, so that running one experiment does not drop yesterday's rows)."""
        ours = self._table_spec(table)
        if not self.config.get("run"):
            return ours
        chosen = {spec["name"]: spec for spec in ours}
        whole = Study({**self.config, "run": None})._table_spec(table)
        return [chosen.get(spec["name"]) or {**spec, "outside_run": True} for spec in whole]

    def _table_spec(self, table: int) -> list[dict]:
        out = []
        for ev in self.evaluations(table):
            exp = self.experiment(ev.experiment)
            if exp.get("replicate_of"):  # read through its row's `replicates`
                continue
            out.append(
                {
                    "name": ev.experiment,
                    "row": exp["row"],
                    "dataset": exp["dataset"],
                    "testset": ev.testset,
                    "model": exp["model"],
                    "eps_ls": exp["train"]["eps_ls"],
                    "steps": exp["train"]["steps"],
                    "average": exp["average"] if ev.model == "average" else 1,
                    "paper": exp["paper"],
                    "scoring": self.bleu_scoring(exp["dataset"]),
                    # what the tables compare with the paper's setting of the row (aiayn.study.paper)
                    "preset": exp["preset"],
                    "task": exp["task"],
                    "pair": [self.dataset(exp["dataset"]).get(s) for s in ("src", "tgt")],
                    "train": {k: exp["train"][k] for k in ("steps", "tokens_per_update", "warmup_steps", "eps_ls")},
                    "decode": exp["decode"],
                    # the runs of the row, one per seed: [{"seed", "name"}] (the row's own name alone without seeds)
                    "replicates": [
                        {"seed": self.experiment(n)["train"]["seed"], "name": n} for n in self.replicates(ev.experiment)
                    ],
                }
            )
        return out

    def model_for(self, experiment: str, testset: str) -> str:
        """Which model of `experiment` decodes `testset`: "average" or "final"."""
        for ev in self.evaluations():
            if (ev.experiment, ev.testset) == (experiment, testset):
                return ev.model
        raise ConfigError(f"experiment {experiment!r} is not evaluated on {testset!r}")

    # -- data ----------------------------------------------------------------------------------
    def _members(self, dataset: str, part: str) -> list[dict]:
        ds = self.dataset(dataset)
        return ds["train"] if part == "train" else [ds["eval_sets"][part]]

    def archives_for(self, dataset: str, part: str) -> list[str]:
        """Archive names a translation dataset needs for `part` ("train" or an eval-set name)."""
        return list(dict.fromkeys(m["archive"] for m in self._members(dataset, part) if m.get("archive")))

    def local_files(self, dataset: str, part: str) -> list[str]:
        """Files on disk (members without an archive: your own corpus) that `part` of `dataset` reads."""
        return [m[side] for m in self._members(dataset, part) if not m.get("archive") for side in ("src", "tgt")]

    def archives(self) -> list[str]:
        """Every archive some dataset of the study needs."""
        names: list[str] = []
        for ds in self.datasets("translation"):
            for part in ["train", *self.dataset(ds)["eval_sets"]]:
                names += self.archives_for(ds, part)
        names += [
            self.dataset(ds)["treebank_archive"]
            for ds in self.datasets("parsing")
            if self.dataset(ds).get("treebank_archive")
        ]
        return list(dict.fromkeys(names))

    def archive_file(self, name: str) -> str:
        """The file an archive is stored under in downloads/: its name with its URL's suffix
        (`aiayn.study.layout.archive_filename`), or <name>.tar.gz if generated."""
        archive = self.config["archives"][name]
        return f"{name}.tar.gz" if archive.get("generate") else archive_filename(name, archive["url"])


def sources_line(command_line_files: list, replaced: bool, workflow_file: str = "config.yaml") -> str:
    """One line saying which config files define the study: the tables carry it on top (the
    demo's `study.yaml` replaces `config.yaml`, though Snakemake's header lists both)."""
    shown = [os.path.relpath(f) if os.path.isabs(f) else str(f) for f in command_line_files]
    files = [s if not s.startswith("..") else str(f) for s, f in zip(shown, command_line_files)]
    if not files:
        return f"Study: `{workflow_file}`."
    given = ", ".join(f"`{f}`" for f in files)
    if replaced:
        return f"Study: {given}, which replaces `{workflow_file}` in this run."
    return f"Study: `{workflow_file}`, extended by {given}."
