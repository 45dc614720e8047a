"""WMT14 for real: downloads (checksum, resume, retry), safe extraction, SGML, alignment, cleaning,
vocabularies, encoding, and the data stages of the DAG against a local HTTP server."""

from __future__ import annotations

import gzip
import json
import socket
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import ROOT, real_data, snakemake_study
from wmt_fixtures import Server, make_tar, sha256

from aiayn.data import binary, vocab
from aiayn.data.download import download
from aiayn.data.encode import encode_corpus
from aiayn.data.prepare import extract_members, prepare_eval, prepare_train, read_lines, sgml_segments
from aiayn.errors import UserError

CLEAN = {"min_len": 1, "max_len": 250, "max_ratio": 9.0, "max_chars": 5000}


def shared(*parts) -> Path:
    return real_data(*parts)


def text(lines) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


# -- downloads -----------------------------------------------------------------------------------------
@pytest.fixture
def served(tmp_path):
    root = tmp_path / "www"
    archive = make_tar(
        root / "wmt14" / "training-parallel-nc-v9.tgz",
        {
            "training/news-commentary-v9.de-en.en": text([f"sentence {i}" for i in range(5000)]),
            "training/news-commentary-v9.de-en.de": text([f"Satz {i}" for i in range(5000)]),
        },
    )
    with Server(root) as server:
        yield server, archive


def test_good_download(served, tmp_path):
    server, archive = served
    out = tmp_path / "dl" / "nc.tgz"
    download(server.url + "wmt14/training-parallel-nc-v9.tgz", out, sha256(archive), log=lambda m: None)
    assert out.read_bytes() == archive.read_bytes() and not out.with_name("nc.tgz.part").exists()


def test_interrupted_download_is_resumed(served, tmp_path):
    server, archive = served
    server.failures["/wmt14/training-parallel-nc-v9.tgz"] = "cut"
    out = tmp_path / "dl" / "nc.tgz"
    messages = []
    download(server.url + "wmt14/training-parallel-nc-v9.tgz", out, sha256(archive), wait=0, log=messages.append)
    assert out.read_bytes() == archive.read_bytes()
    ranges = [r for p, r in server.requests if p.endswith("nc-v9.tgz")]
    assert ranges[0] is None and ranges[1] == f"bytes={archive.stat().st_size // 2}-"  # resumed, not restarted
    assert any("attempt 1 failed" in m for m in messages)


def test_a_transfer_cut_without_content_length_is_resumed_by_the_configured_size(served, tmp_path):
    """A server that closes early without announcing a length: the short file looks finished; the
    size from config.yaml tells it is not, so it is resumed, not thrown away as a wrong checksum."""
    server, archive = served
    server.failures["/wmt14/training-parallel-nc-v9.tgz"] = "cut-unannounced"
    out = tmp_path / "dl" / "nc.tgz"
    messages = []
    url = server.url + "wmt14/training-parallel-nc-v9.tgz"
    download(url, out, sha256(archive), wait=0, size=archive.stat().st_size, log=messages.append)
    assert out.read_bytes() == archive.read_bytes()
    assert any("the connection closed after" in m for m in messages)
    ranges = [r for p, r in server.requests if p.endswith("nc-v9.tgz")]
    assert ranges[1] == f"bytes={archive.stat().st_size // 2}-"


def test_wrong_checksum_leaves_nothing(served, tmp_path):
    server, archive = served
    out = tmp_path / "dl" / "nc.tgz"
    with pytest.raises(UserError, match=r"sha256 is [0-9a-f]{64}, config.yaml expects 0{64}; the download was removed"):
        download(server.url + "wmt14/training-parallel-nc-v9.tgz", out, "0" * 64, log=lambda m: None)
    assert list(out.parent.iterdir()) == []


def test_a_download_that_got_nothing_does_not_offer_to_resume(tmp_path):
    out = tmp_path / "dl" / "nc.tgz"
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/nc.tgz"
    with pytest.raises(UserError, match=r"download failed after 2 attempts \(.*\); run again$"):
        download(url, out, "0" * 64, retries=1, wait=0, log=lambda m: None)


def test_truncated_download_fails_clearly_after_retries(served, tmp_path):
    server, archive = served
    server.failures["/wmt14/training-parallel-nc-v9.tgz"] = "lie"
    out = tmp_path / "dl" / "nc.tgz"
    with pytest.raises(UserError, match="download failed after 3 attempts .* run again to resume"):
        download(
            server.url + "wmt14/training-parallel-nc-v9.tgz",
            out,
            sha256(archive),
            retries=2,
            wait=0,
            log=lambda m: None,
        )
    assert not out.exists()  # only the .part, never a final file


def test_missing_file_is_named(served, tmp_path):
    server, _ = served
    with pytest.raises(UserError, match="HTTP 404"):
        download(server.url + "nope.tgz", tmp_path / "x", "0" * 64, log=lambda m: None)


# -- archives and text ------------------------------------------------------------------------------------
def test_member_escaping_the_folder_is_refused(tmp_path):
    bad = make_tar(tmp_path / "bad.tgz", {"training/a.en": b"x\n", "../../evil.txt": b"owned\n"})
    with pytest.raises(UserError, match=r"refusing the archive, member '../../evil.txt' is unsafe"):
        extract_members(bad, {"training/a.en"}, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path.parent / "evil.txt").exists()


def test_absolute_member_stays_inside_and_links_out_are_refused(tmp_path):
    odd = make_tar(tmp_path / "odd.tgz", {"/abs/member": b"x\n"})
    found = extract_members(odd, {"/abs/member"}, tmp_path / "out")  # the data filter strips the leading /
    assert found["/abs/member"] == tmp_path / "out" / "abs/member" and found["/abs/member"].read_bytes() == b"x\n"
    import io
    import tarfile

    with tarfile.open(tmp_path / "link.tgz", "w:gz") as tar:
        link = tarfile.TarInfo("training/a.en")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link, io.BytesIO(b""))
    with pytest.raises(UserError, match="member 'training/a.en' is unsafe"):
        extract_members(tmp_path / "link.tgz", {"training/a.en"}, tmp_path / "out2")


def test_sgml_reader_on_the_real_newstest2014():
    for sgm, plain in (
        ("newstest2014-deen-src.en.sgm.gz", "en-de/newstest2014.en"),
        ("newstest2014-deen-ref.de.sgm.gz", "en-de/newstest2014.de"),
        ("newstest2014-fren-ref.fr.sgm.gz", "en-fr/newstest2014.fr"),
    ):
        segments = sgml_segments(shared("wmt14", "sgm", sgm))
        assert len(segments) == 3003
        assert segments == list(read_lines(shared("wmt14", plain)))


def corpus_archive(tmp_path, en: list[str], de: list[str] | bytes, name="nc.tgz"):
    de_bytes = de if isinstance(de, bytes) else text(de)
    return make_tar(tmp_path / name, {"training/c.en": text(en), "training/c.de": de_bytes})


MEMBERS = [{"archive": "nc", "src": "training/c.en", "tgt": "training/c.de"}]


def outputs(out):
    """prepare_train's three outputs under the folder `out`."""
    return {"out_src": out / "train.src", "out_tgt": out / "train.tgt", "report_path": out / "r.json"}


def test_misaligned_corpus_names_file_and_line(tmp_path):
    archive = corpus_archive(tmp_path, ["a b", "c d", "e f"], ["a b", "c d"])
    out = tmp_path / "data"
    with pytest.raises(UserError, match=r"nc.tgz:training/c.de ends at line 2 but .*training/c.en goes on"):
        prepare_train(MEMBERS, {"nc": str(archive)}, CLEAN, **outputs(out))
    assert not (out / "train.src").exists() and not (out / "train.tgt").exists()


def test_invalid_utf8_names_file_and_line(tmp_path):
    archive = corpus_archive(tmp_path, ["a b", "c d", "e f"], b"a b\nc \xff d\ne f\n")
    out = tmp_path / "data"
    with pytest.raises(UserError, match=r"training/c.de, line 2: not valid UTF-8"):
        prepare_train(MEMBERS, {"nc": str(archive)}, CLEAN, **outputs(out))
    assert not list(out.glob("train.*"))


def test_a_nul_byte_is_no_text_but_a_corpus_cleans_it(tmp_path):
    """Text holds no NUL byte: a file given to be read as text that has one is refused, naming the line;
    a training corpus (a web crawl may hold one) has it made a space, counted with the line separators."""
    (tmp_path / "input.txt").write_bytes(b"one\ntw\0o\n")
    with pytest.raises(UserError, match=r"input.txt, line 2: holds a NUL byte"):
        list(read_lines(tmp_path / "input.txt"))
    archive = corpus_archive(tmp_path, ["a b", "c d", "e f"], b"a b\nc\0d\ne f\n")
    report = prepare_train(MEMBERS, {"nc": str(archive)}, CLEAN, **outputs(tmp_path / "data"))
    assert report["separators_replaced"] == 1 and (tmp_path / "data/train.tgt").read_text().splitlines()[1] == "c d"


def test_nel_inside_lines_keeps_alignment(tmp_path):
    en = gzip.open(shared("wmt_news_2008_2012", "en-de", "newssyscomb2009.en.gz"), "rb").read()
    de = gzip.open(shared("wmt_news_2008_2012", "en-de", "newssyscomb2009.de.gz"), "rb").read()
    assert len(de.decode().splitlines()) > 502  # what str.splitlines() would do
    archive = make_tar(tmp_path / "nc.tgz", {"training/c.en": en, "training/c.de": de})
    out = tmp_path / "data"
    report = prepare_train(MEMBERS, {"nc": str(archive)}, CLEAN, **outputs(out))
    assert report["corpora"][0]["pairs"] == 502 and report["separators_replaced"] == de.decode().count("\u0085") >= 2
    src, tgt = list(read_lines(out / "train.src")), list(read_lines(out / "train.tgt"))
    assert len(src) == len(tgt) == report["kept"] and not any("\u0085" in line for line in tgt)


def test_your_own_files_are_read_and_left_as_they_are(tmp_path):
    """A corpus of files on disk (plain and gzipped) beside an archive's: prepare reads them and
    leaves every one in place, byte for byte; only its scratch copies out of the archive go."""
    archive = corpus_archive(tmp_path, ["a b", "c d"], ["e f", "g h"])
    mine = {"train.en": b"one two\nthree four\n", "train.xx.gz": gzip.compress(b"un deux\ntrois quatre\n")}
    for name, data in mine.items():
        (tmp_path / name).write_bytes(data)
    corpora = [*MEMBERS, {"src": str(tmp_path / "train.en"), "tgt": str(tmp_path / "train.xx.gz")}]
    out = tmp_path / "data"
    report = prepare_train(corpora, {"nc": str(archive)}, CLEAN, **outputs(out))
    assert report["kept"] == 4 and list(read_lines(out / "train.tgt"))[2:] == ["un deux", "trois quatre"]
    assert {name: (tmp_path / name).read_bytes() for name in mine} == mine and archive.is_file()
    assert not list(out.glob("*tmp*")) and sorted(p.name for p in out.iterdir()) == ["r.json", "train.src", "train.tgt"]


def test_cleaning_counts(tmp_path):
    en = ["ok one", "", "short", "a " * 300, "one two three four five six seven", "fine pair", "x" * 6000]
    de = ["gut eins", "leer", "", "b " * 300, "eins", "gutes paar", "ein wort"]
    archive = corpus_archive(tmp_path, en, de)
    out = tmp_path / "data"
    report = prepare_train(
        MEMBERS,
        {"nc": str(archive)},
        {"min_len": 1, "max_len": 250, "max_ratio": 1.5, "max_chars": 5000},
        **outputs(out),
    )
    assert report["removed"] == {"empty": 2, "too_short": 0, "too_long": 1, "ratio": 1, "too_many_chars": 1}
    assert list(read_lines(out / "train.src")) == ["ok one", "fine pair"]
    assert json.loads((out / "r.json").read_text())["kept"] == 2


def test_eval_set_line_count_is_checked(tmp_path):
    src = shared("wmt14", "sgm", "newstest2014-deen-src.en.sgm.gz")
    ref = shared("wmt14", "sgm", "newstest2014-deen-ref.de.sgm.gz")
    archive = make_tar(
        tmp_path / "dev.tgz",
        {
            "dev/newstest2014-deen-src.en.sgm": gzip.open(src).read(),
            "dev/newstest2014-deen-ref.de.sgm": gzip.open(ref).read(),
        },
    )
    spec = {"src": "dev/newstest2014-deen-src.en.sgm", "tgt": "dev/newstest2014-deen-ref.de.sgm", "lines": 3003}
    assert prepare_eval(spec, "newstest2014", archive, out_src=tmp_path / "t.src", out_tgt=tmp_path / "t.tgt") == 3003
    assert list(read_lines(tmp_path / "t.tgt")) == list(read_lines(shared("wmt14", "en-de", "newstest2014.de")))
    with pytest.raises(UserError, match="has 3003 segments, newstest2014 is expected to have 2737: set "):
        prepare_eval(
            {**spec, "lines": 2737}, "newstest2014", archive, out_src=tmp_path / "u.src", out_tgt=tmp_path / "u.tgt"
        )


# -- vocabulary and encoding -----------------------------------------------------------------------------------
def test_sentencepiece_round_trip_on_real_sentences(tmp_path):
    en, de = shared("wmt14", "en-de", "newstest2013.en"), shared("wmt14", "en-de", "newstest2013.de")
    model = tmp_path / "spm.model"
    vocab.train([en, de], model, model_type="bpe", size=2000, input_sentence_size=0)
    sp = vocab.load(model)
    lines = list(read_lines(de))[:500]
    decoded = [vocab.to_text(sp, ids) for ids in vocab.to_ids(sp, lines)]
    # Normalize() marks spaces with U+2581; decoding gives them back as spaces
    assert decoded == [sp.Normalize(line).replace("\u2581", " ").strip() for line in lines]
    assert sum(a != b for a, b in zip(decoded, lines)) < len(lines) // 10  # NFKC changes few real sentences
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, 2, 3)


def test_encode_round_trip_and_statistics(tmp_path):
    en, de = shared("wmt14", "en-de", "newstest2013.en"), shared("wmt14", "en-de", "newstest2013.de")
    model = tmp_path / "spm.model"
    vocab.train([en, de], model, model_type="bpe", size=1000, input_sentence_size=0)
    stats = encode_corpus(str(en), str(de), str(model), str(model), out=str(tmp_path / "dev.bin"), chunk=700)
    corpus = binary.read(tmp_path / "dev.bin")
    sp = vocab.load(model)
    assert len(corpus) == stats["pairs"] == 3000
    for i in (0, 699, 700, 2999):  # across chunk borders
        assert corpus.src(i).tolist() == sp.Encode(list(read_lines(en))[i])
        assert corpus.tgt(i).tolist() == sp.Encode(list(read_lines(de))[i])
    assert stats["src_tokens"] == int(corpus.src_lengths.sum()) and stats["longest_tgt"] == int(
        corpus.tgt_lengths.max()
    )
    assert corpus.src_tokens.dtype == np.uint16


def test_truncated_encoded_file_is_reported(tmp_path):
    import toy

    path = toy.corpus(tmp_path / "t.bin", n=50)
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(UserError, match="t.bin: truncated"):
        binary.read(path)


# -- the data stages of the DAG ---------------------------------------------------------------------------------
def wmt_like_study(tmp_path: Path, server_root: Path) -> dict:
    """Archives in the real WMT layouts (news slices stand in for the training corpora) and a config
    with both language pairs; EN-FR's Gigaword-like corpus comes as .gz members of a plain tar."""

    def news(pair, name, lang):
        return gzip.open(shared("wmt_news_2008_2012", pair, f"{name}.{lang}.gz"), "rb").read()

    trains = {
        "europarl-v7": ("wmt13/training-parallel-europarl-v7.tgz", "training/europarl-v7.{p}", "newstest2010"),
        "commoncrawl": ("wmt13/training-parallel-commoncrawl.tgz", "commoncrawl.{p}", "newstest2011"),
        "news-commentary-v9": ("wmt14/training-parallel-nc-v9.tgz", "training/news-commentary-v9.{p}", "newstest2009"),
    }
    archives, corpora = {}, {"de": [], "fr": []}
    for name, (path, stem, source) in trains.items():
        members = {}
        for lang in ("de", "fr"):
            pair = f"{lang}-en"
            members[stem.format(p=pair) + ".en"] = news(f"en-{lang}", source, "en")
            members[stem.format(p=pair) + f".{lang}"] = news(f"en-{lang}", source, lang)
            corpora[lang].append(
                {"archive": name, "src": stem.format(p=pair) + ".en", "tgt": stem.format(p=pair) + f".{lang}"}
            )
        tar = make_tar(server_root / path, members)
        archives[name] = {"url": f"http://www.statmt.org/{path}", "sha256": sha256(tar)}
    giga = make_tar(
        server_root / "wmt10/training-giga-fren.tar",
        {
            f"giga-fren.release2.fixed.{lang}.gz": gzip.compress(news("en-fr", "newstest2012", lang))
            for lang in ("en", "fr")
        },
        mode="w",
    )
    archives["giga-fren"] = {"url": "http://www.statmt.org/wmt10/training-giga-fren.tar", "sha256": sha256(giga)}
    corpora["fr"].append(
        {"archive": "giga-fren", "src": "giga-fren.release2.fixed.en.gz", "tgt": "giga-fren.release2.fixed.fr.gz"}
    )
    dev_members = {}
    for lang, pair in (("de", "deen"), ("fr", "fren")):
        for side in ("src.en", f"ref.{lang}"):
            dev_members[f"dev/newstest2014-{pair}-{side}.sgm"] = gzip.open(
                shared("wmt14", "sgm", f"newstest2014-{pair}-{side}.sgm.gz")
            ).read()
        for side in ("en", lang):
            dev_members[f"dev/newstest2013.{side}"] = shared("wmt14", f"en-{lang}", f"newstest2013.{side}").read_bytes()
    dev = make_tar(server_root / "wmt19/translation-task/dev.tgz", dev_members)
    archives["dev"] = {"url": "http://data.statmt.org/wmt19/translation-task/dev.tgz", "sha256": sha256(dev)}
    paper = yaml.safe_load((ROOT / "config.yaml").read_text())
    datasets = {
        f"wmt14-en-{lang}": {
            **paper["datasets"][f"wmt14-en-{lang}"],
            "train": corpora[lang],
            "vocab": {
                "model_type": paper["datasets"][f"wmt14-en-{lang}"]["vocab"]["model_type"],
                "size": 2000,
                "shared": True,
            },
        }
        for lang in ("de", "fr")
    }
    return {
        "archives": archives,
        "datasets": datasets,
        "presets": paper["presets"],
        "experiments": {k: paper["experiments"][k] for k in ("base-en-de", "base-en-fr")},
    }


@pytest.mark.slow
def test_data_stages_of_the_dag_against_a_local_server(tmp_path):
    root = tmp_path / "www"
    config = wmt_like_study(tmp_path, root)
    with Server(root) as server:
        config["mirror"] = server.url
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        run = snakemake_study(tmp_path, "data", "--configfile", str(tmp_path / "config.yaml"))
    assert run.returncode == 0, run.stderr[-4000:]
    data = tmp_path / "results/data/wmt14-en-de"
    report = json.loads((data / "train.report.json").read_text())
    assert [c["pairs"] for c in report["corpora"]] == [2489, 3003, 2525]  # newstest2010, 2011, 2009
    nel = (
        gzip.open(shared("wmt_news_2008_2012", "en-de", "newstest2009.de.gz"), "rt", encoding="utf-8")
        .read()
        .count("\u0085")
    )
    assert report["separators_replaced"] == nel >= 6  # the U+0085 of newstest2009.de
    train = binary.read(data / "train.bin")
    assert len(train) == report["kept"] > 7000
    assert len(binary.read(data / "newstest2013.bin")) == 3000
    assert len(list(read_lines(data / "newstest2014.tgt"))) == 3003
    assert (data / "spm.src.model").read_bytes() == (data / "spm.tgt.model").read_bytes()  # shared vocabulary
    fr = tmp_path / "results/data/wmt14-en-fr"
    fr_report = json.loads((fr / "train.report.json").read_text())
    assert [c["pairs"] for c in fr_report["corpora"]] == [2489, 3003, 2525, 3003]  # + the .gz members of a plain tar
    assert len(binary.read(fr / "train.bin")) == fr_report["kept"] and len(binary.read(fr / "newstest2013.bin")) == 3000
    assert list(read_lines(fr / "newstest2014.tgt"))[:5] == [
        " ".join(x.split(" ")) for x in sgml_segments(shared("wmt14", "sgm", "newstest2014-fren-ref.fr.sgm.gz"))[:5]
    ]
    assert not list((tmp_path / "results/downloads").glob("*.part"))


def test_a_byte_order_mark_is_left_out_of_corpora_and_kept_and_said_where_scored(tmp_path):
    """Corpora and eval sets leave an editor's UTF-8 BOM out (what the pipeline scores has none).
    A file given to `score` is scored as the paper's tools score it: tokenizer.perl and sacreBLEU's
    command line keep the mark as text, so identical text with a BOM on the reference scores under
    100, and the score's output says why."""
    from aiayn.evaluation.score import score_file

    text = "ein Hund läuft im Park .\nzwei Katzen schlafen .\n"
    (tmp_path / "ref.de").write_text("\ufeff" + text, encoding="utf-8")
    (tmp_path / "hyp.de").write_text(text, encoding="utf-8")
    assert list(read_lines(tmp_path / "ref.de"))[0] == "ein Hund läuft im Park ."
    scoring = {"moses_lang": "de", "compound_split": True, "sacrebleu_tokenize": "13a"}
    logged = []
    scores = score_file("translation", tmp_path / "hyp.de", tmp_path / "ref.de", tmp_path / "s.json", scoring=scoring,
                        log=logged.append)  # fmt: skip
    assert scores["tokenized_bleu"]["ref_len"] == 11  # 10 words, and the mark a token of its own
    assert scores["tokenized_bleu"]["score"] < 100 and scores["sacrebleu"]["score"] < 100
    assert any(m.startswith(f"{tmp_path / 'ref.de'}: starts with a byte-order mark") for m in logged)


def test_an_eval_set_of_no_lines_is_refused_where_it_is_prepared(tmp_path):
    """Not four jobs later, at score."""
    archive = make_tar(tmp_path / "dev.tgz", {"dev.en": b"", "dev.de": b""})
    with pytest.raises(UserError, match="dev.en: no segments; dev must have some"):
        prepare_eval(
            {"src": "dev.en", "tgt": "dev.de"}, "dev", archive, out_src=tmp_path / "d.src", out_tgt=tmp_path / "d.tgt"
        )
    assert not (tmp_path / "d.src").exists()
