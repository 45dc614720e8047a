"""Where every file of the study lives, so that rules, commands, the library and tests agree.

results/downloads/<archive><suffix of its URL>   raw archives, checksum-verified
results/data/<dataset>/train.{src,tgt}           cleaned, aligned training text
results/data/<dataset>/train.report.json         pairs kept and removed by cleaning
results/data/<dataset>/<evalset>.{src,tgt}       dev/test text, one segment per line
results/data/<dataset>/<evalset>.gold            gold trees under TOP (parsing datasets)
results/data/<dataset>/spm.{src,tgt}.model       sentencepiece models (identical when shared; a .vocab beside)
results/data/<dataset>/vocab.json                pieces made against pieces asked, and why when fewer
results/data/<dataset>/<split>.bin               encoded token ids (aiayn.data.binary)
results/<experiment>/experiment.json             the resolved settings of the run
results/<experiment>/check.json                  the model's checks before training (aiayn.check)
results/<experiment>/checkpoints/                step checkpoints; last.pt, the final model, once training is done
results/<experiment>/metrics.jsonl               progress and dev loss, JSON lines
results/<experiment>/tensorboard/                the same as TensorBoard events (with the tensorboard package)
results/<experiment>/train.lock                  held by the run's one trainer (aiayn.runtime.checkpoint.exclusive)
results/<experiment>/replaced-<date>-<time>/     checkpoints and metrics of an earlier run with other settings
results/<experiment>/figures/*.png               learning curves and gradient norm, learning rate, attention maps
results/<experiment>/figures/diagonal.json       the encoder-decoder attention's distance from the diagonal per layer
results/<experiment>/average.pt                  mean of the last K checkpoints (§6.1)
results/<experiment>/average.json                the steps averaged
results/<experiment>/selected.json               the candidate a tuned experiment took (§6.3)
results/<experiment>.tune-<values>/              the candidates of a tuning grid
results/<experiment>/<testset>.<lang>            translations (parses), one line per source line
results/<experiment>/<testset>.score.json        scores
results/<experiment>/hf/, hf-ct2/                the decoded model for Hugging Face and CTranslate2
results/tables/table{2,3,4}.{md,csv}             the paper's tables beside ours
results/tables/table1.{md,csv,png}               Table 1 (§4), measured
results/plan.md                                  the study's GPU hours, checkpoint disk and memory, before launch
results/rehearsal/cost.{md,csv}                  what each job of the study's rehearsal cost (docs/rehearsal.md)
results/logs/<rule>/<name>.log, results/benchmarks/<rule>/<name>.tsv
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from urllib.parse import urlsplit

DATA, DOWNLOADS, TABLES, LOGS, BENCHMARKS = "data", "downloads", "tables", "logs", "benchmarks"
# folders (and files) directly under results/ that are not experiments; an experiment may not take
# their names: report(.html) of --report, demo/ the offline demo's own results
RESERVED_NAMES = frozenset({DATA, DOWNLOADS, TABLES, LOGS, BENCHMARKS, "report", "demo"})


@dataclass(frozen=True)
class Layout:
    results: str = "results"

    def _p(self, *parts: str) -> str:
        return posixpath.join(self.results, *parts)

    def download(self, filename: str) -> str:
        return self._p(DOWNLOADS, filename)

    def data(self, dataset: str, filename: str) -> str:
        return self._p(DATA, dataset, filename)

    def text(self, dataset: str, split: str, side: str) -> str:
        """`side`: "src", "tgt", or "gold" (a parsing set's gold trees)."""
        return self.data(dataset, f"{split}.{side}")

    def train_report(self, dataset: str) -> str:
        """What cleaning kept and removed of the training pairs (JSON)."""
        return self.data(dataset, "train.report.json")

    def spm(self, dataset: str, side: str) -> str:
        return self.data(dataset, f"spm.{side}.model")

    def vocab_info(self, dataset: str) -> str:
        """The pieces each vocabulary holds against the size asked, and why when fewer (JSON)."""
        return self.data(dataset, "vocab.json")

    def encoded(self, dataset: str, split: str) -> str:
        return self.data(dataset, f"{split}.bin")

    def experiment_json(self, experiment: str) -> str:
        return self._p(experiment, "experiment.json")

    def check(self, experiment: str) -> str:
        """What the check stage measured on the experiment's model before it trained (JSON)."""
        return self._p(experiment, "check.json")

    def checkpoints(self, experiment: str) -> str:
        return self._p(experiment, "checkpoints")

    def final_checkpoint(self, experiment: str) -> str:
        """The model a finished training ends with (the selected candidate's, for a tuned experiment)."""
        return self.final_in(self.checkpoints(experiment))

    @staticmethod
    def final_in(checkpoints: str) -> str:
        """The final model in a run's folder of step checkpoints."""
        return posixpath.join(str(checkpoints), "last.pt")

    def metrics(self, experiment: str) -> str:
        return self.metrics_of(self.checkpoints(experiment))

    @staticmethod
    def train_lock(checkpoints) -> str:
        """The lock the one trainer of the run in `checkpoints` holds, and its averaging (beside the folder,
        whatever link names it)."""
        return Layout.beside(os.path.realpath(checkpoints), "train.lock")

    @staticmethod
    def beside(checkpoints: str, name: str) -> str:
        """The run's file `name` beside its folder of step checkpoints: `name` itself where the folder
        is the layout's `checkpoints/` (one run to an experiment's folder), else `<folder>.<name>`, so
        that two runs whose folders sit side by side never share a file they write."""
        folder = str(checkpoints).rstrip("/")
        own = posixpath.basename(folder)
        return posixpath.join(posixpath.dirname(folder), name if own == "checkpoints" else f"{own}.{name}")

    @staticmethod
    def metrics_of(checkpoints: str) -> str:
        """The metrics.jsonl of the run whose step checkpoints are in folder `checkpoints`."""
        return Layout.beside(checkpoints, "metrics.jsonl")

    def tensorboard(self, experiment: str) -> str:
        """The run's TensorBoard event files (aiayn.training.progress.Board), where the package is installed."""
        return self.tensorboard_of(self.checkpoints(experiment))

    @staticmethod
    def tensorboard_of(checkpoints: str) -> str:
        """The TensorBoard folder of the run whose step checkpoints are in folder `checkpoints`."""
        return Layout.beside(checkpoints, "tensorboard")

    @staticmethod
    def replaced(checkpoints: str, stamp: str) -> str:
        """Where an earlier run of the same experiment is moved (its checkpoints and metrics) when
        its settings changed: beside the checkpoints folder, named by `stamp` (date-time)."""
        return posixpath.join(posixpath.dirname(str(checkpoints).rstrip("/")), f"replaced-{stamp}")

    def figure(self, experiment: str, name: str) -> str:
        return self._p(experiment, "figures", name)

    def average(self, experiment: str) -> str:
        return self._p(experiment, "average.pt")

    def selected(self, experiment: str) -> str:
        """Which candidate of its tuning grid a selected experiment took (JSON)."""
        return self._p(experiment, "selected.json")

    def average_record(self, experiment: str) -> str:
        """Which steps average.pt averaged (JSON; the tables read it without torch)."""
        return self._p(experiment, "average.json")

    def model(self, experiment: str, which: str) -> str:
        """The model file decoded: which = "average" or "final"."""
        return self.average(experiment) if which == "average" else self.final_checkpoint(experiment)

    def export(self, experiment: str) -> str:
        """The Hugging Face folder of the experiment's decoded model (`aiayn export`)."""
        return self._p(experiment, "hf")

    def export_ct2(self, experiment: str) -> str:
        """The same model converted to CTranslate2."""
        return self._p(experiment, "hf-ct2")

    def translation(self, experiment: str, testset: str, lang: str) -> str:
        return self._p(experiment, f"{testset}.{lang}")

    def score(self, experiment: str, testset: str) -> str:
        return self._p(experiment, f"{testset}.score.json")

    def table(self, number: int, ext: str) -> str:
        return self._p(TABLES, f"table{number}.{ext}")

    def plan(self) -> str:
        """The study's cost before launch (`python -m aiayn plan`)."""
        return self._p("plan.md")

    @staticmethod
    def rehearsal_costs() -> str:
        """What each job of the study's rehearsal cost (benchmarks/rehearsal.py), whatever the study's results."""
        return posixpath.join("results", "rehearsal", "cost.csv")

    def log(self, rule: str, name: str) -> str:
        return self._p(LOGS, rule, f"{name}.log")

    def benchmark(self, rule: str, name: str) -> str:
        return self._p(BENCHMARKS, rule, f"{name}.tsv")


ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar", ".gz", ".zip")


def archive_filename(name: str, url: str) -> str:
    """The file archive `name` is stored under: the archive's name from config.yaml with the suffix
    of its URL's file (two archives whose URLs end alike, two years' `dev.tgz`, stay two files)."""
    base = posixpath.basename(urlsplit(url).path).lower()
    suffix = next((s for s in ARCHIVE_SUFFIXES if base.endswith(s)), "")
    return name + suffix


def mirrored(url: str, mirror: str | None) -> str:
    """`url` with its "scheme://host/" replaced by `mirror` (a site's local copy), if one is set."""
    if not mirror:
        return url
    parts = urlsplit(url)
    return mirror.rstrip("/") + "/" + parts.path.lstrip("/")
