"""Sentencepiece vocabularies with the special ids every part of aiayn assumes.

PAD 0, UNK 1, BOS 2, EOS 3 (aiayn.encoded); the model's padding id is 0.
"""

from __future__ import annotations

import os
from pathlib import Path

import sentencepiece as spm

from aiayn.data.binary import BOS, EOS, PAD, UNK
from aiayn.data.corpus import read_lines
from aiayn.errors import UserError
from aiayn.io import atomic_paths, scratch_dir

# a dataset's `vocab:` settings where they are not given (§5.1: shared BPE, 37k for EN-DE)
SETTINGS = {"model_type": "bpe", "size": 37000, "shared": True, "input_sentence_size": 10_000_000}


def load(path: str | os.PathLike) -> spm.SentencePieceProcessor:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: sentencepiece model not found")
    sp = spm.SentencePieceProcessor()
    try:
        sp.Load(str(path))
    except (OSError, RuntimeError) as exc:
        raise UserError(f"{path}: not a sentencepiece model ({exc}); rerun the vocabulary step") from None
    ids = (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id())
    if ids != (PAD, UNK, BOS, EOS):
        raise UserError(f"{path}: special ids (pad, unk, bos, eos) are {ids}, aiayn needs {(PAD, UNK, BOS, EOS)}")
    return sp


def encode(sp: spm.SentencePieceProcessor, lines: list[str]) -> list[list[int]]:
    return sp.Encode(lines)


def decode(sp: spm.SentencePieceProcessor, ids: list[int]) -> str:
    return sp.Decode(ids)


def train(
    inputs: list[str],
    out: str | os.PathLike,
    *,
    model_type: str,
    size: int,
    input_sentence_size: int,
    threads: int = 1,
    seed: int = 1,
) -> None:
    """Train a sentencepiece model on `inputs` (one sentence per line) and write it to `out` atomically.

    A shuffled sample of `input_sentence_size` sentences bounds the memory on large corpora (§5.1
    sizes: 4.5M / 36M pairs). If the text cannot support `size` pieces (tiny corpora), a smaller
    vocabulary is made rather than failing.
    """
    out = Path(out)
    spm.set_random_generator_seed(seed)
    # sentencepiece names its two files after a prefix: train in a private folder, then move them
    with (
        atomic_paths(out, out.with_suffix(".vocab")) as (model, pieces),
        scratch_dir(out) as scratch,
    ):
        prefix = Path(scratch) / "spm"
        try:
            spm.SentencePieceTrainer.Train(
                input=",".join(str(p) for p in inputs),
                model_prefix=str(prefix),
                vocab_size=size,
                model_type=model_type,
                pad_id=PAD,
                unk_id=UNK,
                bos_id=BOS,
                eos_id=EOS,
                character_coverage=1.0,
                input_sentence_size=input_sentence_size,
                shuffle_input_sentence=True,
                num_threads=threads,
                hard_vocab_limit=False,
                minloglevel=2,  # errors only: a vocabulary smaller than asked is reported by describe()
            )
        except RuntimeError as exc:
            raise UserError(f"sentencepiece could not train on {', '.join(map(str, inputs))}: {exc}") from None
        os.replace(f"{prefix}.model", model)
        os.replace(f"{prefix}.vocab", pieces)


def describe(model: str | os.PathLike, asked: int, texts: list[str | os.PathLike], model_type: str) -> dict:
    """What one trained vocabulary holds against what was asked, and why it holds fewer pieces.

    sentencepiece runs with hard_vocab_limit=false: on a text that cannot support `asked` pieces it
    makes a smaller vocabulary without failing. That happens when its pieces run out: neither BPE
    merges nor unigram pieces span a space, so a text of few distinct words has few pieces to make.
    """
    pieces = load(model).GetPieceSize()
    info = {"model": str(model), "model_type": model_type, "asked": asked, "pieces": pieces, "reason": None}
    if pieces < asked:
        words, chars = set(), set()
        for text in texts:
            for line in read_lines(text):
                split = line.split()
                words.update(split)
                chars.update(*split)
        info["reason"] = (
            f"sentencepiece made {pieces} pieces, not the {asked} asked: {', '.join(map(str, texts))} "
            f"{'has' if len(texts) == 1 else 'have'} only {len(words):,} distinct words over {len(chars):,} "
            f"characters, and {model_type} pieces never span a space, so no more pieces can be made "
            "(hard_vocab_limit=false: a smaller vocabulary rather than a failure)"
        )
    return info


def describe_pair(settings: dict, model_src, model_tgt, text_src, text_tgt) -> dict:
    """{"source": describe(...), "target": ...}: a dataset's two vocabularies against the size
    asked, each judged on the text it was trained on (both sides when shared)."""
    settings = {**SETTINGS, **settings}
    texts = {"source": [text_src], "target": [text_tgt]}
    if settings["shared"]:
        texts = {"source": [text_src, text_tgt], "target": [text_src, text_tgt]}
    return {
        side: describe(model, settings["size"], texts[side], settings["model_type"])
        for side, model in (("source", model_src), ("target", model_tgt))
    }
