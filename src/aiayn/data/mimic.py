"""Corpora of the paper's sizes with the statistics of real text, for the study's rehearsal (docs/rehearsal.md).

The WMT14 training corpora are 4.5M (EN-DE) and 36M (EN-FR) sentence pairs that this project
cannot ship. A mimic has their size and the shape of real news text: each pair takes the source
and target lengths (in words) of a pair of a real parallel sample (the WMT news sets of
../shared/data, 13,573 pairs per language pair), and its words are drawn, independently, from
the word frequencies of that sample's side (Zipf's law over the real vocabulary). It is not
translation: it is what prepare, the vocabularies, encode and the trainer see of a corpus of
that size, with the real length distribution and vocabulary statistics.

`write_archives` writes every archive a study's translation datasets read, in the layout its
config names (members, a gzipped or plain tar, gzipped members), each dataset's pairs split over
its corpora in the proportions of the real WMT14 ones (`WMT14_PAIRS`), and the dev and test sets
as the real newstest sets. A study whose `mirror` serves them downloads, verifies and prepares
them as it would the real archives.
"""

from __future__ import annotations

import gzip
import os
import posixpath
from collections import Counter
from pathlib import Path

import numpy as np

from aiayn.data.generate import write_tar
from aiayn.errors import UserError
from aiayn.io import file_sha256, scratch_dir
from aiayn.runtime.lines import read_lines

# the sentence pairs of each WMT14 training corpus (statmt.org's figures), by (archive, pair)
WMT14_PAIRS = {
    ("europarl-v7", "de-en"): 1_920_209,
    ("commoncrawl", "de-en"): 2_399_123,
    ("news-commentary-v9", "de-en"): 201_288,
    ("europarl-v7", "fr-en"): 2_007_723,
    ("commoncrawl", "fr-en"): 3_244_152,
    ("news-commentary-v9", "fr-en"): 183_251,
    ("un", "fr-en"): 12_886_831,
    ("giga-fren", "fr-en"): 22_520_376,
}
CHUNK = 100_000  # pairs generated at a time: memory stays at one chunk, whatever the corpus size


class Sample:
    """A real parallel sample: the (source, target) word counts of its pairs and each side's word
    frequencies."""

    def __init__(self, src_lines: list[str], tgt_lines: list[str]):
        pairs = [(s.split(), t.split()) for s, t in zip(src_lines, tgt_lines)]
        pairs = [(s, t) for s, t in pairs if s and t]
        if len(src_lines) != len(tgt_lines) or not pairs:
            raise UserError("a mimic needs an aligned sample of some pairs (as many source lines as target lines)")
        self.lengths = np.array([(len(s), len(t)) for s, t in pairs], dtype=np.int64)  # (pairs, 2)
        self.words, self.cumulative = [], []
        for side in (0, 1):
            counts = Counter(w for pair in pairs for w in pair[side])
            words, freq = zip(*counts.most_common())
            self.words.append(np.array(words, dtype=object))
            cum = np.cumsum(np.array(freq, dtype=np.float64))
            self.cumulative.append(cum / cum[-1])

    @classmethod
    def read(cls, files: list[tuple[Path, Path]]) -> Sample:
        """The sample of aligned text files (plain or gzipped) `files`: [(source, target)]."""
        src, tgt = [], []
        for a, b in files:
            src += list(read_lines(a, what="a sample text"))
            tgt += list(read_lines(b, what="a sample text"))
        return cls(src, tgt)

    def chunks(self, n: int, seed: int):
        """`n` mimic pairs, as (source bytes, target bytes) of at most CHUNK lines each."""
        rng = np.random.default_rng(seed)
        for start in range(0, n, CHUNK):
            lengths = self.lengths[rng.integers(0, len(self.lengths), min(CHUNK, n - start))]  # (count, 2)
            sides = []
            for side in (0, 1):
                k = lengths[:, side]
                ids = np.searchsorted(self.cumulative[side], rng.random(int(k.sum())), side="right")
                words = self.words[side][np.minimum(ids, len(self.words[side]) - 1)]
                ends = np.cumsum(k).tolist()
                lines = (" ".join(words[e - m : e]) for e, m in zip(ends, k.tolist()))
                sides.append(("\n".join(lines) + "\n").encode("utf-8"))
            yield sides[0], sides[1]


def write_pairs(sample: Sample, n: int, src: Path, tgt: Path, *, seed: int) -> None:
    """`n` mimic pairs as two aligned files, each gzipped (level 1) when its name ends in .gz."""
    opened = [gzip.GzipFile(p, "wb", compresslevel=1, mtime=0) if p.name.endswith(".gz") else open(p, "wb")
              for p in (src, tgt)]  # fmt: skip
    try:
        for a, b in sample.chunks(n, seed):
            opened[0].write(a)
            opened[1].write(b)
    finally:
        for f in opened:
            f.close()


def split_pairs(total: int, corpora: list[tuple[str, str]]) -> list[int]:
    """`total` pairs over `corpora` [(archive, pair)] in the proportions of WMT14's own counts."""
    missing = [c for c in corpora if c not in WMT14_PAIRS]
    if missing:
        raise UserError(f"no WMT14 size known for {missing}: a mimic splits a dataset over WMT14's corpora only")
    real = [WMT14_PAIRS[c] for c in corpora]
    shares = [total * r // sum(real) for r in real]
    shares[-1] += total - sum(shares)
    return shares


def real_file(root: Path, member: str) -> Path:
    """The file under `root` (plain, or gzipped) named as the archive member `member`: a newstest set."""
    base = posixpath.basename(member)
    for path in sorted(root.rglob(base)) + sorted(root.rglob(base + ".gz")):
        return path
    raise UserError(f"{root}: no file {base} (or {base}.gz) for the member {member} of the dev archive")


def write_archives(
    config: dict, sizes: dict[str, int], samples: dict[str, Sample], *, real: Path, out: Path, seed: int = 1, log=print
) -> dict[str, dict]:
    """Every archive the translation datasets of the study `config` read (its `archives` that a dataset
    in `sizes` names), written under `out` at the path of its URL, `sizes[dataset]` training pairs of
    `samples[dataset]`'s statistics over each dataset's corpora, its eval sets the real files under
    `real`. Returns {archive: {"sha256", "size"}}, what a study's `archives:` entry says of each."""
    # archive -> member -> how to make it: ("pairs", dataset, corpus, pairs, seed) (its source member
    # stands for both sides) or ("real", file)
    members: dict[str, dict[str, tuple]] = {}
    for number, (dataset, total) in enumerate(sizes.items()):
        ds = config["datasets"][dataset]
        pair = "-".join(sorted({ds["src"], ds["tgt"]}, key=lambda lang: lang == "en"))  # de-en, fr-en
        corpora = [c for c in ds["train"] if c.get("archive")]
        for i, (corpus, n) in enumerate(zip(corpora, split_pairs(total, [(c["archive"], pair) for c in corpora]))):
            how = ("pairs", dataset, corpus, n, seed + 1000 * number + i)
            members.setdefault(corpus["archive"], {})[corpus["src"]] = how
        for spec in ds["eval_sets"].values():
            for side in ("src", "tgt") if spec.get("archive") else ():
                members.setdefault(spec["archive"], {})[spec[side]] = ("real", real_file(real, spec[side]))
    written = {}
    for archive, parts in members.items():
        path = out / config["archives"][archive]["url"].split("://", 1)[1].split("/", 1)[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        with scratch_dir(path) as tmp:
            files: dict[str, Path | bytes] = {}
            for name, how in parts.items():
                if how[0] == "real":
                    text = b"".join(line.encode("utf-8") + b"\n" for line in read_lines(how[1], keep_bom=True))
                    files[name] = gzip.compress(text, mtime=0) if name.endswith(".gz") else text
                    continue
                _, dataset, corpus, n, corpus_seed = how
                src, tgt = (Path(tmp) / corpus[side].replace("/", "__") for side in ("src", "tgt"))
                write_pairs(samples[dataset], n, src, tgt, seed=corpus_seed)
                files[corpus["src"]], files[corpus["tgt"]] = src, tgt
                log(f"{archive}: {n:,} pairs of {dataset} -> {corpus['src']}, {corpus['tgt']}")
            write_tar(path, files)
        written[archive] = {"sha256": file_sha256(path), "size": os.path.getsize(path)}
        log(f"{path}: {written[archive]['size']:,} bytes")
    return written
