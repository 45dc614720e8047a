"""A small world of real inputs the command tests share, made once per module: text, two unrelated
sentencepiece vocabularies, encoded data and a trained checkpoint (`build_world`)."""

from __future__ import annotations

import io
import json
import random
import tarfile
from pathlib import Path

import toy

from aiayn.data import binary
from aiayn.training.distributed import Env
from aiayn.training.train import RunFiles, Trainer, run

SGM = (  # a WMT-style SGML test set of three segments
    '<srcset><doc docid="d">\n<seg id="1">one</seg>\n<seg id="2">two</seg>\n<seg id="3">three</seg>\n</doc></srcset>\n'
)
WORDS = "the cat sat on a mat and dog ran far away from home to see big red ball in park".split()


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def make_tar(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return path


def build_world(w: Path) -> Path:
    """Text, two unrelated sentencepiece vocabularies, encoded data and a trained checkpoint, in `w`."""
    from aiayn.data import vocab
    from aiayn.data.encode import encode_corpus

    (w / "a.txt").write_text("\n".join(sentences(300, 1)) + "\n")
    (w / "b.txt").write_text("\n".join(s.upper() + " xyzzy" for s in sentences(300, 2)) + "\n")
    for name, text in (("spm-a", "a.txt"), ("spm-b", "b.txt")):
        vocab.train([str(w / text)], w / f"{name}.model", model_type="bpe", size=60, input_sentence_size=0)
    for text, spm, out in (("a.txt", "spm-a", "train.bin"), ("b.txt", "spm-b", "dev-b.bin")):
        model = str(w / f"{spm}.model")
        encode_corpus(str(w / text), str(w / text), model, model, out=str(w / out), log=lambda m: None)
    settings = toy.settings(steps=2)
    settings["vocab"]["shared"] = True
    files = RunFiles(w / "checkpoints", w / "model.pt", w / "metrics.jsonl")
    assert run(Trainer(settings, binary.read(w / "train.bin"), None, files, env=Env()), 0) == 0
    (w / "empty.txt").write_text("")
    (w / "ref.txt").write_text("the cat sat\n")
    (w / "settings.json").write_text(json.dumps(settings))
    return w
