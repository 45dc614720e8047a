"""The rehearsal's corpora of the paper's sizes (aiayn.data.mimic), at a small size: pairs drawn with
the sample's sentence lengths and word frequencies, split over the WMT14 corpora in their real
proportions, and written in the layout config.yaml's archives name, which the study's own
prepare reads (docs/rehearsal.md)."""

from __future__ import annotations

import tarfile
from collections import Counter

import pytest
from conftest import ROOT

from aiayn.data import mimic
from aiayn.data.prepare import prepare_train
from aiayn.errors import UserError
from aiayn.io import file_sha256
from aiayn.study import config as cfg

SAMPLE = mimic.Sample(["a b c", "a a", "d e f g"], ["x y", "x", "y y z w"])


def test_pairs_take_the_samples_lengths_and_word_frequencies():
    lines = [(a.decode(), b.decode()) for a, b in SAMPLE.chunks(30_000, seed=3)]
    src = [line for chunk_s, _ in lines for line in chunk_s.splitlines()]
    tgt = [line for _, chunk_t in lines for line in chunk_t.splitlines()]
    assert len(src) == len(tgt) == 30_000
    pairs = Counter((len(s.split()), len(t.split())) for s, t in zip(src, tgt))
    assert set(pairs) == {(3, 2), (2, 1), (4, 4)}  # the sample's pairs of lengths, no other
    assert all(abs(n / 30_000 - 1 / 3) < 0.02 for n in pairs.values())  # drawn evenly
    words = Counter(w for s in src for w in s.split())
    total = sum(words.values())
    for word, share in {"a": 3 / 9, "b": 1 / 9, "g": 1 / 9}.items():  # the sample's frequencies on its side
        assert abs(words[word] / total - share) < 0.01, (word, words[word] / total)
    assert not {"x", "y", "z", "w"} & set(words)  # each side its own words
    again = [(a.decode(), b.decode()) for a, b in SAMPLE.chunks(30_000, seed=3)]
    assert again == lines  # a seed gives the same corpus


def test_a_dataset_is_split_over_its_corpora_as_wmt14s():
    corpora = [("europarl-v7", "de-en"), ("commoncrawl", "de-en"), ("news-commentary-v9", "de-en")]
    shares = mimic.split_pairs(4_500_000, corpora)
    assert sum(shares) == 4_500_000
    real = [mimic.WMT14_PAIRS[c] for c in corpora]
    assert all(abs(s / 4_500_000 - r / sum(real)) < 1e-6 for s, r in zip(shares, real))
    with pytest.raises(UserError, match="no WMT14 size known"):
        mimic.split_pairs(10, [("europarl-v7", "xx-en")])


def test_the_archives_are_config_yamls_and_its_prepare_reads_them(tmp_path):
    config = cfg.validate(cfg.merged([ROOT / "config.yaml"]))
    real = tmp_path / "real"
    real.mkdir()
    for spec in config["datasets"]["wmt14-en-de"]["eval_sets"].values():  # stand-ins for the newstest sets
        for side in ("src", "tgt"):
            (real / spec[side].rsplit("/", 1)[-1]).write_text("".join(f"{side} line {i}\n" for i in range(5)))
    logged = []
    written = mimic.write_archives(config, {"wmt14-en-de": 3_000}, {"wmt14-en-de": SAMPLE}, real=real,
                                   out=tmp_path / "mirror", log=logged.append)  # fmt: skip
    assert set(written) == {"europarl-v7", "commoncrawl", "news-commentary-v9", "dev"}
    ds = config["datasets"]["wmt14-en-de"]
    counted = 0
    for corpus in ds["train"]:
        path = tmp_path / "mirror" / url(config, corpus["archive"])
        assert written[corpus["archive"]] == {"sha256": file_sha256(path), "size": path.stat().st_size}
        with tarfile.open(path) as tar:
            lines = {side: tar.extractfile(corpus[side]).read().decode().splitlines() for side in ("src", "tgt")}
        assert len(lines["src"]) == len(lines["tgt"]) > 0
        counted += len(lines["src"])
    assert counted == 3_000
    # the study's own prepare over them: every pair read, aligned, and cleaned by config.yaml's rules
    # (the sample's pairs (3, 2), (2, 1), (4, 4) words: the second above the ratio 1.5, the others kept)
    archives = {c["archive"]: str(tmp_path / "mirror" / url(config, c["archive"])) for c in ds["train"]}
    report = prepare_train(ds["train"], archives, config["cleaning"], out_src=tmp_path / "train.src",
                           out_tgt=tmp_path / "train.tgt", report_path=tmp_path / "train.report.json",
                           log=lambda m: None)  # fmt: skip
    assert report["kept"] + sum(report["removed"].values()) == 3_000
    kept = (tmp_path / "train.src").read_text().splitlines()
    assert len(kept) == report["kept"] and {len(line.split()) for line in kept} == {3, 4}
    assert 0.25 < report["removed"]["ratio"] / 3_000 < 0.42  # a third of the pairs, (2, 1)


def url(config: dict, archive: str) -> str:
    """The path under the mirror of an archive (its URL without the scheme and host)."""
    return config["archives"][archive]["url"].split("://", 1)[1].split("/", 1)[1]
