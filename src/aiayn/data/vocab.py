"""Sentencepiece vocabularies (§5.1) with the special ids every part of aiayn assumes, and their identity.

PAD 0, UNK 1, BOS 2, EOS 3 (aiayn.data.binary); the model's padding id is 0. With a shared
vocabulary one model is trained on both sides and written under both names (three-way weight
tying needs one vocabulary); otherwise one model per side. A vocabulary's identity is what encoded
corpora and checkpoints record of the models they were made with (`identity`), and `differing_side`
is the one comparison of two such records.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

import sentencepiece as spm

from aiayn.data.binary import BOS, EOS, PAD, UNK
from aiayn.errors import UserError
from aiayn.io import (
    atomic_paths,
    atomic_write_text,
    file_sha256,
    parse_json,
    readable,
    scratch_dir,
    together,
    write_failure,
)
from aiayn.runtime.lines import read_lines

SIDES = {"src": "source", "tgt": "target"}


def load(path: str | os.PathLike) -> spm.SentencePieceProcessor:
    """A sentencepiece model, checked (`verified`), with the special ids aiayn needs."""
    data, path = verified(path)
    return spm.SentencePieceProcessor(model_proto=data)


def to_ids(sp: spm.SentencePieceProcessor, lines: list[str]) -> list[list[int]]:
    """Lines of text as piece ids (without BOS/EOS)."""
    return sp.Encode(lines)


def to_text(sp: spm.SentencePieceProcessor, ids: list[int]) -> str:
    return sp.Decode(ids)


# TrainerSpec fields that say how a model was made, not what it is: the input files, the output
# prefix (a scratch folder of ours) and the threads
INCIDENTAL = ("input", "model_prefix", "num_threads")
IDENTITY = "spm-sha256:"  # an identity's scheme; one without (64 hex digits) is an older file digest
# What a model aiayn writes holds in its TrainerSpec's model_prefix (an incidental field, a record
# only, left out of `canonical`): the SHA-256 of its canonical bytes, checked whenever it is read, as
# an encoded corpus checks its arrays. A model without it (another tool's, an aiayn before 0.5) is
# read unchecked.
CHECKSUM = "aiayn-sha256:"


def model_proto():
    """sentencepiece's own ModelProto class (its sentencepiece_model_pb2, which needs protobuf)."""
    import google.protobuf

    try:
        from sentencepiece import sentencepiece_model_pb2
    except ModuleNotFoundError:
        raise
    except Exception as exc:  # protobuf's VersionError: a protobuf older than the proto's generated code
        raise UserError(
            f"sentencepiece {spm.__version__} cannot read its model proto with protobuf "
            f"{google.protobuf.__version__} ({exc}); install the protobuf it was made for (pip install -U protobuf)"
        ) from None
    return sentencepiece_model_pb2.ModelProto


def _parse(model: bytes):
    """The ModelProto of `model`'s bytes; ValueError for bytes that are not one."""
    from google.protobuf.message import DecodeError

    proto = model_proto()()
    try:
        proto.ParseFromString(model)
    except DecodeError as exc:
        raise ValueError(str(exc)) from None
    return proto


def canonical(model: bytes) -> bytes:
    """The bytes of a sentencepiece model with its TrainerSpec's incidental fields (input files,
    output prefix, threads) left out: what it is, not how it was made. sentencepiece loads it as
    it loads the model (those fields are only a record). Raises ValueError for bytes that are not
    a model proto."""
    proto = _parse(model)
    for name in INCIDENTAL:
        proto.trainer_spec.ClearField(name)
    return proto.SerializeToString(deterministic=True)


def with_checksum(model: bytes) -> bytes:
    """`canonical(model)` with its own SHA-256 recorded in it (CHECKSUM): what aiayn writes."""
    proto = _parse(canonical(model))
    proto.trainer_spec.model_prefix = CHECKSUM + hashlib.sha256(canonical(model)).hexdigest()
    return proto.SerializeToString(deterministic=True)


def verified(path: str | os.PathLike) -> tuple[bytes, Path]:
    """The bytes of the sentencepiece model at `path` (and the path), checked against the checksum
    it records (CHECKSUM) when it records one: a flipped bit, a cut or a hand edit is refused in one
    line naming the file, never encoded or decoded with."""
    path = readable(path, "a sentencepiece model")
    data = path.read_bytes()
    try:
        proto = _parse(data)
        # a file cut short keeps its first pieces, and loses its specs (written after them) with the checksum
        if not (proto.HasField("trainer_spec") and proto.HasField("normalizer_spec")):
            raise ValueError("cut short")
        recorded = proto.trainer_spec.model_prefix
        if not isinstance(recorded, str):  # protobuf gives the bytes of a string field that is not UTF-8
            raise ValueError("not UTF-8")
        if recorded.startswith(CHECKSUM) and recorded != CHECKSUM + hashlib.sha256(canonical(data)).hexdigest():
            raise ValueError("checksum")
        sp = spm.SentencePieceProcessor(model_proto=data)  # protobuf alone takes much damage for a model
    except (ValueError, RuntimeError, OSError):
        raise UserError(f"{path}: not a sentencepiece model (damaged); rerun the vocabulary step") from None
    if not sp.GetPieceSize():  # sentencepiece loads an empty proto as a model of no pieces
        raise UserError(f"{path}: not a sentencepiece model (empty or cut short); rerun the vocabulary step")
    ids = (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id())
    if ids != (PAD, UNK, BOS, EOS):
        raise UserError(f"{path}: special ids (pad, unk, bos, eos) are {ids}, aiayn needs {(PAD, UNK, BOS, EOS)}")
    return data, path


def identity(path: str | os.PathLike) -> str:
    """What identifies a sentencepiece model: its pieces and settings (the SHA-256 of `canonical`),
    so that a vocabulary trained again to the same pieces is the same one. Encoded corpora record
    it of the models they were encoded with, checkpoints of those they were trained with."""
    data, _ = verified(path)
    return IDENTITY + hashlib.sha256(canonical(data)).hexdigest()


def matches(recorded: str | None, path: str | os.PathLike) -> bool:
    """Whether the model file `path` is the vocabulary whose identity was `recorded` (None: unknown,
    taken as a match). A record of an older aiayn is the file's SHA-256, compared as such."""
    if not recorded:
        return True
    if recorded.startswith(IDENTITY):
        return recorded == identity(path)
    return recorded == file_sha256(path)


def differing_side(a: dict | None, b: dict | None) -> str | None:
    """The first side ("source", "target") whose vocabulary identities in the records `a` and `b`
    ({"src": identity, "tgt": identity}) differ, or None. A side a record does not know, or that the
    two record in different schemes (one by an older aiayn), is not compared."""
    for side, name in SIDES.items():
        x, y = (a or {}).get(side), (b or {}).get(side)
        if x and y and x != y and x.startswith(IDENTITY) == y.startswith(IDENTITY):
            return name
    return None


def differing_file(recorded: dict | None, paths: dict) -> str | None:
    """The first side whose model file (`paths`: {"src", "tgt"}: paths, or None) is not the
    vocabulary `recorded` ({"src", "tgt"}: identities) names, or None."""
    for side, name in SIDES.items():
        if paths.get(side) and not matches((recorded or {}).get(side), paths[side]):
            return name
    return None


def check_model(state: dict, model_path, spm: dict) -> None:
    """Where a model meets a vocabulary (translate, export, figures): the sentencepiece models `spm`
    ({"src", "tgt"}: paths) must be those the checkpoint `state` (of `model_path`) was trained with."""
    for path in spm.values():
        identity(path)  # a missing or damaged model is named as such
    side = differing_file(state.get("vocab"), spm)
    if side:
        path = spm["src" if side == "source" else "tgt"]
        raise UserError(
            f"{path} is not the {side} vocabulary {model_path} was trained with (another dataset's, or a damaged "
            "copy); give the spm models of the model's dataset, or rerun its vocab step"
        )


def _spm_names(scratch: Path, inputs: list, links: Path, out: Path) -> tuple[Path, list[Path]]:
    """Names sentencepiece can take (text, and for its inputs no comma): the model's prefix in the
    scratch folder (whose folder must be UTF-8), each input as a link in `links`."""
    try:
        str(scratch).encode()
    except UnicodeEncodeError:
        raise UserError(
            f"{out.parent}: sentencepiece takes only folder names that are UTF-8; write elsewhere"
        ) from None
    texts = [links / f"input-{i}" for i in range(len(inputs))]
    for text, path in zip(texts, inputs):
        text.symlink_to(os.path.abspath(path))
    return scratch / "spm", texts


def train(
    inputs: list[str],
    out: str | os.PathLike,
    *,
    model_type: str,
    size: int,
    input_sentence_size: int,
    threads: int = 1,
    seed: int = 1,
    also: tuple = (),
) -> None:
    """Train a sentencepiece model on `inputs` (one sentence per line) and write it to `out` atomically
    (and the same model to each path of `also`, in the same write).

    A shuffled sample of `input_sentence_size` sentences bounds the memory on large corpora (§5.1
    sizes: 4.5M / 36M pairs). If the text cannot support `size` pieces (tiny corpora), a smaller
    vocabulary is made rather than failing.
    """
    out = Path(out)
    spm.set_random_generator_seed(seed)
    # sentencepiece names its two files after a prefix: train in a private folder, then move them;
    # it reads its inputs by names it can take (text, no comma), links in a folder of the system's
    with (
        atomic_paths(out, pieces_of(out), *also) as (model, pieces, *copies),
        scratch_dir(out) as scratch,
        tempfile.TemporaryDirectory() as links,
    ):
        prefix, texts = _spm_names(Path(scratch), inputs, Path(links), out)
        try:
            spm.SentencePieceTrainer.Train(
                input=",".join(map(str, texts)),
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
                num_threads=min(threads, 1024),  # sentencepiece's most
                hard_vocab_limit=False,
                minloglevel=2,  # errors only: a vocabulary smaller than asked is reported by describe()
            )
        except RuntimeError as exc:
            failed = UserError(f"sentencepiece could not train on {', '.join(map(str, inputs))}: {exc}")
            raise write_failure(out, failed) from None
        try:  # sentencepiece says nothing of a write that failed (a full disk): read back what it wrote
            spm.SentencePieceProcessor(model_file=f"{prefix}.model")
        except (OSError, RuntimeError):
            raise write_failure(out, UserError(f"{out}: sentencepiece wrote no readable model")) from None
        # written without the scratch prefix, input paths and threads (the same pieces, the same
        # bytes), its checksum in their place
        written = with_checksum(Path(f"{prefix}.model").read_bytes())
        for path in (model, *copies):
            path.write_bytes(written)
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


def describe_pair(settings: dict, models: tuple, texts: tuple) -> dict:
    """{"source": describe(...), "target": ...}: a dataset's two vocabularies (`models`: source,
    target) against the size asked (`settings`: the dataset's complete `vocab:` settings), each
    judged on the text it was trained on (`texts`: source, target; both sides when shared)."""
    return {
        side: describe(model, settings["size"], list(texts) if settings["shared"] else [text], settings["model_type"])
        for side, model, text in zip(SIDES.values(), models, texts)
    }


def pieces_of(model) -> Path:
    """The pieces sentencepiece writes beside a model: spm.src.model's spm.src.vocab, as its prefix
    names them; a model named otherwise (spm-a.bak) gets its name and .vocab (spm-a.bak.vocab), never
    another model's pieces (spm-a.vocab)."""
    model = Path(model)
    return model.with_suffix(".vocab") if model.suffix == ".model" else model.with_name(model.name + ".vocab")


def is_pieces(path: Path) -> bool:
    """Whether `path` reads as sentencepiece's pieces (`piece<TAB>score` lines; Snakemake removes a rerun
    job's model, not the pieces beside it, which are then this command's own to write again)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        fields = f.readline().rstrip("\n").split("\t")
    return len(fields) == 2 and re.fullmatch(r"-?\d+(\.\d+)?(e-?\d+)?", fields[1]) is not None


def derived_files(vocab: str, out_src, out_tgt) -> tuple[list, list]:
    """The pieces sentencepiece writes beside each model `train_pair` trains (`<model>.vocab`; under a
    shared vocabulary the target's model is a copy of the source's, with no pieces of its own):
    what aiayn.cli.paths adds to the options' paths. `vocab`: the command's JSON settings."""
    try:
        shared = parse_json(vocab, finite=False).get("shared", True)
    except (ValueError, AttributeError):  # the command refuses it, naming --vocab
        shared = True
    models = [("--out-src", out_src)] + ([] if shared else [("--out-tgt", out_tgt)])
    for option, model in models:  # a file no option names, neither beside its model nor sentencepiece's pieces
        if pieces_of(model).is_file() and not Path(model).is_file() and not is_pieces(pieces_of(model)):
            raise UserError(f"{pieces_of(model)}: a file no option names, which sentencepiece would write over with "
                            f"{option} {model}'s pieces; move it aside, or give {option} another name")  # fmt: skip
    return [(f"{option}'s .vocab", str(pieces_of(model)), "file") for option, model in models], []


def train_pair(settings: dict, train_src, train_tgt, *, out_src, out_tgt, threads: int = 1, log=print) -> dict:
    """A dataset's two vocabularies (`settings`: its complete `vocab:` settings), trained on its
    training text: one model written under both names when shared. Returns `describe_pair`."""
    for path in (train_src, train_tgt):
        with open(readable(path, "the training text"), "rb") as f:  # sentencepiece reads the bytes as they are
            if f.read(2) == b"\x1f\x8b":
                raise UserError(f"{path}: gzip-compressed, where sentencepiece reads plain text; gunzip it (gunzip -k)")
        # read whole, as the one text reader reads (UTF-8, no NUL): sentencepiece would take a damaged line in silence
        if not sum(bool(line.strip()) for line in read_lines(path, what="the training text")):
            raise UserError(f"{path}: no sentences to train a vocabulary on; rerun the prepare step")
    common = dict(
        model_type=settings["model_type"],
        size=settings["size"],
        input_sentence_size=settings["input_sentence_size"],
        threads=threads,
    )
    with together():  # both models in place, or neither
        if settings["shared"]:
            train([train_src, train_tgt], out_src, also=(out_tgt,), **common)
        else:
            train([train_src], out_src, **common)
            train([train_tgt], out_tgt, **common)
    info = describe_pair(settings, (out_src, out_tgt), (train_src, train_tgt))
    for side, one in info.items():
        log(f"{side} vocabulary: {one['pieces']} pieces -> {one['model']}")
        if one["reason"]:
            log(f"{side} vocabulary: {one['reason']}")
    return info


def write_info(settings: dict, model_src, model_tgt, *, text_src, text_tgt, out, log=print) -> dict:
    """vocab.json: `describe_pair` of a dataset's vocabularies, where a reader of the results looks."""
    for path in (text_src, text_tgt):  # read only when a vocabulary is smaller than asked: checked always
        readable(path, "the training text")
    info = describe_pair(settings, (model_src, model_tgt), (text_src, text_tgt))
    atomic_write_text(out, json.dumps(info, indent=2) + "\n")
    for side, one in info.items():
        log(f"{side}: {one['pieces']} of {one['asked']} pieces{'; ' + one['reason'] if one['reason'] else ''}")
    return info
