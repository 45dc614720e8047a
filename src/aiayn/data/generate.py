"""Generated data for the offline demo: a made-up language pair and a made-up treebank.

The pair ("Eng" -> "Zil") is built so that translating it needs what attention gives:
- reordering across the sentence: Eng is subject-verb-object, Zil is subject-object-adverb-verb,
  and Zil puts adjectives after their noun;
- agreement: Zil determiners and adjectives agree with their noun's gender, the verb with the
  subject's number (singular / plural), which sits far from it;
- one word to two (some Eng adverbs become two Zil words) and two to one (Eng compound nouns such
  as "ice cream" become one Zil word).
So copying the source scores ~0 BLEU and a word-by-word dictionary scores poorly.

The treebank's trees come from the same Eng grammar, written as Penn Treebank brackets (with POS
tags and punctuation), one file per "section" in the LDC layout, so the parsing stages run unchanged.
Everything is a deterministic function of the seed.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import tarfile
from dataclasses import dataclass
from pathlib import Path

from aiayn.errors import UserError
from aiayn.io import OUTPUT_MARK, atomic_path, atomic_paths

CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables))


def _unique(rng: random.Random, n: int, syllables: tuple[int, int], taken: set[str]) -> list[str]:
    out = []
    while len(out) < n:
        w = _word(rng, rng.randint(*syllables))
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out


@dataclass
class Lexicon:
    nouns: list[tuple[str, str, str]]  # (eng, zil, gender "m"/"f"); eng may be two words (compounds)
    adjectives: list[tuple[str, str]]
    verbs: list[tuple[str, str]]
    adverbs: list[tuple[str, str]]  # zil may be two words


def lexicon(seed: int) -> Lexicon:
    rng = random.Random(seed)
    taken: set[str] = set()
    eng = _unique(rng, 130, (1, 2), taken)
    zil = _unique(rng, 130, (2, 3), taken)
    nouns = [(eng[i], zil[i], rng.choice("mf")) for i in range(40)]
    nouns += [(f"{eng[40 + 2 * i]} {eng[41 + 2 * i]}", zil[40 + i], rng.choice("mf")) for i in range(8)]  # two -> one
    adjectives = [(eng[60 + i], zil[60 + i]) for i in range(20)]
    verbs = [(eng[80 + i], zil[80 + i]) for i in range(24)]
    adverbs = [(eng[104 + i], zil[104 + i] + (f" {zil[56 + i]}" if i % 2 else "")) for i in range(12)]  # one -> two
    return Lexicon(nouns, adjectives, verbs, adverbs)


DET = {("the", "m"): "lo", ("the", "f"): "la", ("a", "m"): "un", ("a", "f"): "una"}


def _noun_phrase(rng, lex: Lexicon, plural: bool):
    """(Eng words, Zil words, Eng tree) of one noun phrase."""
    det = rng.choice(["the", "a"]) if not plural else "the"
    noun_e, noun_z, gender = rng.choice(lex.nouns)
    adjs = [rng.choice(lex.adjectives) for _ in range(rng.choice([0, 0, 1]))]
    noun_e_words = noun_e.split()
    if plural:
        noun_e_words[-1] += "s"
    eng = [det] + [a[0] for a in adjs] + noun_e_words
    zdet = DET[(det, gender)] + ("s" if plural else "")
    zil = [zdet, noun_z + ("i" if plural else "")] + [a[1] + ("a" if gender == "f" else "o") for a in adjs]
    nn = "NNS" if plural else "NN"
    leaves = ["(DT %s)" % det] + ["(JJ %s)" % a[0] for a in adjs] + [f"({nn} {w})" for w in noun_e_words]
    return eng, zil, "(NP %s)" % " ".join(leaves)


def sentence(rng: random.Random, lex: Lexicon):
    """One (Eng, Zil, Eng tree) triple."""
    plural = rng.random() < 0.4
    subj_e, subj_z, subj_t = _noun_phrase(rng, lex, plural)
    obj_e, obj_z, obj_t = _noun_phrase(rng, lex, rng.random() < 0.4)
    verb_e, verb_z = rng.choice(lex.verbs)
    verb_e = verb_e if plural else verb_e + "s"
    verb_z = verb_z + ("n" if plural else "t")
    adverb = rng.choice(lex.adverbs) if rng.random() < 0.5 else None
    eng = subj_e + [verb_e] + obj_e + ([adverb[0]] if adverb else [])
    zil = subj_z + obj_z + (adverb[1].split() if adverb else []) + [verb_z]
    vbz = "VBP" if plural else "VBZ"
    vp = f"(VP ({vbz} {verb_e}) {obj_t}" + (f" (ADVP (RB {adverb[0]}))" if adverb else "") + ")"
    tree = f"(S {subj_t} {vp} (. .))"
    # written as people write, the period against the last word (as in WMT's raw text): the tokenized
    # BLEU tokenizes it off; sacreBLEU sees detokenized text, as it expects
    return " ".join(eng) + ".", " ".join(zil) + ".", tree


def write_tar(out: Path, members: dict[str, bytes | Path]) -> None:
    """A tar archive of `members` ({member name: its bytes, or the file that holds them}), gzipped
    (level 1) when `out` is a .tgz or .tar.gz, written atomically; the same members, the same bytes."""
    gzipped = out.name.endswith((".tgz", ".tar.gz"))
    with atomic_path(out) as tmp, open(tmp, "wb") as raw:
        stream = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1) if gzipped else raw
        with tarfile.open(fileobj=stream, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data) if isinstance(data, bytes) else os.path.getsize(data), 0
                with io.BytesIO(data) if isinstance(data, bytes) else open(data, "rb") as f:
                    tar.addfile(info, f)
        if gzipped:
            stream.close()


def splits(seed: int, sizes: dict[str, int]) -> dict[str, list[tuple[str, str, str]]]:
    """Disjoint train/dev/test sets: a sentence seen in an earlier split is drawn again."""
    lex = lexicon(seed)
    rng = random.Random(seed + 1)
    seen: set[str] = set()
    out = {}
    for name, n in sizes.items():
        rows = []
        while len(rows) < n:
            row = sentence(rng, lex)
            if row[0] not in seen:
                seen.add(row[0])
                rows.append(row)
        out[name] = rows
    return out


def write_translation_archive(path: Path, seed: int, sizes: dict[str, int]) -> None:
    """A WMT-style archive: training/demo.eng-zil.{eng,zil} and dev/<set>.{eng,zil}."""
    data = splits(seed, sizes)
    members = {}
    for name, rows in data.items():
        stem = "training/demo.eng-zil" if name == "train" else f"dev/{name}"
        members[f"{stem}.eng"] = "".join(r[0] + "\n" for r in rows).encode()
        members[f"{stem}.zil"] = "".join(r[1] + "\n" for r in rows).encode()
    write_tar(path, members)


def write_treebank_archive(path: Path, seed: int, sizes: dict[str, int]) -> None:
    """An LDC-style treebank archive: parsed/mrg/wsj/<section>/wsj_<section>00.mrg, one section per split."""
    data = splits(seed, sizes)
    members = {}
    for section, rows in data.items():
        members[f"parsed/mrg/wsj/{section}/wsj_{section}00.mrg"] = "".join(f"( {r[2]} )\n" for r in rows).encode()
    write_tar(path, members)


WRITERS = {"translation": write_translation_archive, "treebank": write_treebank_archive}


def write_archive(spec: dict, out, log=print) -> None:
    """The archive `spec` describes: {"kind": "translation" | "treebank", "seed", "sizes": {split: sentences}}
    (the schema's `generate` settings, complete)."""
    WRITERS[spec["kind"]](Path(out), spec["seed"], spec["sizes"])
    log(f"generated {spec['kind']} archive {out}: {spec['sizes']}")


# the plain files examples/own-pair.yaml reads, per split: (source, target)
EXAMPLE_FILES = {"train": ("train.en", "train.xx"), "dev": ("dev.en", "dev.xx"), "test": ("test.en.gz", "test.xx.gz")}
EXAMPLE_SIZES = {"train": 3000, "dev": 100, "test": 100}


def write_example_corpus(folder, seed: int = 7, sizes: dict[str, int] | None = None, log=print) -> list[Path]:
    """The made-up pair as the aligned plain-text files of examples/own-pair.yaml in `folder`
    (data/my-pair): train and dev as text, test gzipped, one sentence per line; all written, or none."""
    sizes = {**EXAMPLE_SIZES, **(sizes or {})}
    for split, n in sizes.items():
        if n < 1:
            raise UserError(f"--{split} {n}: give at least 1 pair")
    data = splits(seed, sizes)
    folder = Path(folder)
    files = [
        (folder / name, [row[side] for row in data[split]])
        for split in EXAMPLE_FILES
        for side, name in enumerate(EXAMPLE_FILES[split])
    ]
    mark = folder / OUTPUT_MARK  # the folder is the command's: a later run may write it again
    with atomic_paths(mark, *(path for path, _ in files)) as (tmp_mark, *temps):
        tmp_mark.write_text("written by `aiayn example-corpus`: it may write these files again\n")
        for tmp, (path, lines) in zip(temps, files):
            text = "".join(line + "\n" for line in lines).encode()
            tmp.write_bytes(gzip.compress(text, mtime=0) if path.suffix == ".gz" else text)
    log(f"wrote the example corpus in {folder}: {', '.join(f'{k} {v} pairs' for k, v in sizes.items())}")
    return [path for path, _ in files]
