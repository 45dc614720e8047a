"""Scores of a decoded test set: BLEU both ways the field reports it, and EVALB for parses.

- sacreBLEU on detokenized text (13a, mixed case), with its signature, and chrF;
- the paper-comparable tokenized BLEU of tensor2tensor (the paper's code: its get_ende_bleu.sh):
  Moses tokenization of hypothesis and reference (`aiayn.evaluation.moses`, tokenizer.perl of
  2017), for EN-DE every intra-word hyphen rewritten as ' ##AT##-##AT## ' (one pass, as the perl
  one-liner does), then multi-bleu.perl on the tokens (`multi_bleu`: no smoothing, so an order
  without a matching n-gram makes BLEU 0);
- the reference of that tokenized BLEU (`reference`): the test set's as WMT distributes it ("wmt"),
  or ("t2t") the same with its quotes as tensor2tensor's released EN-DE reference has them
  (`t2t_reference`), which the paper's figures were scored against; with "t2t" the WMT
  reference's figure is computed too (`tokenized_bleu_wmt`). sacreBLEU is always WMT's;
- `score_file` scores one test set's file (parses by `aiayn.parsing.evalb.score_parses`), and
  `paired_bootstrap_p` compares two systems (Table 3).
"""

from __future__ import annotations

import math
import re
from collections import Counter

import sacrebleu
from sacrebleu.significance import PairedTest

from aiayn.errors import UserError
from aiayn.evaluation import dependence, moses
from aiayn.parsing.evalb import gold_error_lines, score_parses
from aiayn.runtime import records
from aiayn.runtime.lines import read_lines
from aiayn.study import paper

COMPOUND = re.compile(rb"(\S)-(\S)")
ASCII_SPACE = re.compile(r"[ \t\n\r\f\v]+")  # perl's \s on bytes, as multi-bleu.perl reads its files


def compound_split(line: str) -> str:
    """tensor2tensor's get_ende_bleu.sh: perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'.

    Perl runs it without `use utf8`, on the UTF-8 bytes, and so do we: \\S is any byte but ASCII
    white space, and a match consumes the byte after the hyphen. Between two hyphens a one-letter
    ASCII word is split on the first side only (`3-D-Kino` -> `3 ##AT##-##AT## D-Kino`), a
    one-letter non-ASCII word (two bytes) on both (`Nord-Ö-Route` -> `Nord ##AT##-##AT## Ö
    ##AT##-##AT## Route`). The hyphen is ASCII, so no character is ever cut.
    """
    return COMPOUND.sub(rb"\1 ##AT##-##AT## \2", line.encode("utf-8")).decode("utf-8")


def paper_tokenize(lines: list[str], lang: str, split_compounds: bool) -> list[str]:
    """Moses `tokenizer.perl -l LANG` (2017, with its default escaping), then the compound split if asked."""
    out = moses.tokenize(lines, lang)
    return [compound_split(line) for line in out] if split_compounds else out


def words(line: str) -> list[str]:
    """perl's `split` (awk mode) on a line read as bytes: runs of ASCII white space separate words."""
    return [w for w in ASCII_SPACE.split(line) if w]


# tensor2tensor's released newstest2014 German reference (gs://tensor2tensor-checkpoints/transformer_ende_test/
# newstest2014.tok.de), which the paper's EN-DE BLEU was scored against, is newstest2014.de with its Unicode
# double quotes made " by hand, which tokenizer.perl then writes &quot; (M. Popel in tensorflow/tensor2tensor#317:
# no Moses script does it; replace-unicode-punctuation.perl leaves „). newstest2014.de holds 330 „ and 329 “,
# no ”; its 7 single quotes (,Wort‘ and ›Grub‹), whose fate in that file nobody has said, stay as they are.
T2T_QUOTES = "\u201e\u201c\u201d"  # „ “ ”


def t2t_reference(lines: list[str]) -> list[str]:
    """The reference as tensor2tensor's released one has it: every „ “ ” as \"."""
    table = str.maketrans(dict.fromkeys(T2T_QUOTES, '"'))
    return [line.translate(table) for line in lines]


CLOSEST = 9999  # multi-bleu.perl's ($closest_diff, $closest_length) before the first reference
NO_REFERENCE_WORD = "BLEU = 0, 0/0/0/0 (BP=0, ratio=0, hyp_len=0, ref_len=0)"  # multi-bleu.perl, then exit 1


def closest_length(hyp_len: int, ref_len: int) -> int:
    """multi-bleu.perl's reference length of a line with one reference: its search starts from a
    difference (and a length) of 9,999, so a line whose hypothesis is more than 9,999 words longer
    or shorter than its reference adds 9,999, not the reference's length."""
    diff = abs(hyp_len - ref_len)
    if diff < CLOSEST:
        return ref_len
    return min(ref_len, CLOSEST) if diff == CLOSEST else CLOSEST


def multi_bleu(hyp: list[str], ref: list[str]) -> dict:
    """multi-bleu.perl (Moses 2017) with one reference, on tokenized lines: clipped n-gram counts
    over the corpus, no smoothing (a zero precision of any order makes BLEU 0: perl's my_log of 0
    is -9999999999), brevity penalty exp(1 - ref/hyp) when the output is shorter, the reference
    length of each line as its closest-length search finds it (`closest_length`). `line` is what
    multi-bleu.perl prints and `status` its exit status: where the references hold no word it
    prints NO_REFERENCE_WORD and exits 1. An output of no words at all, where multi-bleu.perl dies
    of a division by zero, scores 0.00 with `empty_output` set (and BP 0, the limit)."""
    correct, total = [0] * 4, [0] * 4
    hyp_len = ref_len = 0
    for h, r in zip(hyp, ref):
        hw, rw = words(h), words(r)
        hyp_len, ref_len = hyp_len + len(hw), ref_len + closest_length(len(hw), len(rw))
        for n in range(1, 5):
            ref_counts = Counter(tuple(rw[i : i + n]) for i in range(len(rw) - n + 1))
            for gram, count in Counter(tuple(hw[i : i + n]) for i in range(len(hw) - n + 1)).items():
                total[n - 1] += count
                correct[n - 1] += min(count, ref_counts.get(gram, 0))
    precisions = [c / t if t else 0.0 for c, t in zip(correct, total)]
    empty = hyp_len == 0
    if empty or ref_len == 0:
        bp = bleu = ratio = 0.0
    else:
        bp = math.exp(1 - ref_len / hyp_len) if hyp_len < ref_len else 1.0
        bleu = bp * math.exp(records.added(math.log(p) if p else -9999999999 for p in precisions) / 4)
        ratio = hyp_len / ref_len
    line = (
        f"BLEU = {100 * bleu:.2f}, "
        + "/".join(f"{100 * p:.1f}" for p in precisions)
        + f" (BP={bp:.3f}, ratio={ratio:.3f}, hyp_len={hyp_len}, ref_len={ref_len})"
    )
    return {
        "score": 100 * bleu,
        "precisions": [100 * p for p in precisions],
        "bp": bp,
        "ratio": ratio,
        "hyp_len": hyp_len,
        "ref_len": ref_len,
        "empty_output": empty,
        "line": NO_REFERENCE_WORD if ref_len == 0 else line,
        "status": 1 if ref_len == 0 else 0,
    }


def check_lines(hyp: list[str], ref: list[str], hyp_name: str, ref_name: str, *, expect: int | None) -> None:
    if not ref:
        raise UserError(f"{ref_name}: no lines to score; is it the test set's reference, written whole?")
    if len(hyp) != len(ref):
        raise UserError(f"{hyp_name} has {len(hyp)} lines but {ref_name} has {len(ref)}; they must align line by line")
    if expect is not None and len(ref) != expect:
        raise UserError(f"{ref_name} has {len(ref)} lines, the test set has {expect} (a filtered or partial set?)")


def bleu_scores(
    hyp: list[str],
    ref: list[str],
    *,
    moses_lang: str,
    compound_split: bool,
    sacrebleu_tokenize: str,
    reference: str = "wmt",
) -> dict:
    """Both BLEU protocols and chrF for aligned hypothesis and reference lines; the tokenized BLEU
    against `reference` ("wmt" or "t2t", paper.REFERENCE), and with "t2t" against WMT's too."""
    bleu = sacrebleu.metrics.BLEU(tokenize=sacrebleu_tokenize)
    detok = bleu.corpus_score(hyp, [ref])
    chrf = sacrebleu.metrics.CHRF()
    chrf_score = chrf.corpus_score(hyp, [ref])
    # multi-bleu.perl smooths nothing; sacreBLEU's column keeps sacreBLEU's own defaults (exp
    # smoothing), as its signature says
    hyp_tokens = paper_tokenize(hyp, moses_lang, compound_split)

    def tokenized(lines: list[str], name: str) -> dict:
        ref_tokens = paper_tokenize(lines, moses_lang, compound_split)
        return {**multi_bleu(hyp_tokens, ref_tokens), "moses_lang": moses_lang, "compound_split": compound_split,
                "reference": name}  # fmt: skip

    if reference not in paper.REFERENCE:
        raise ValueError(f"reference {reference!r}: one of {', '.join(paper.REFERENCE)}")
    ours = wmt = tokenized(ref, "wmt")
    if reference == "t2t":
        quotes = sum(line.count(q) for line in ref for q in T2T_QUOTES)
        ours = {**tokenized(t2t_reference(ref), "t2t"), "quotes_changed": quotes}
    return {
        "lines": len(hyp),
        "sacrebleu": {
            "score": sacrebleu_score(detok),
            "signature": str(bleu.get_signature()),
            "bp": detok.bp,
            "hyp_len": detok.sys_len,
            "ref_len": detok.ref_len,
            "precisions": detok.precisions,
        },
        "chrf": {"score": chrf_score.score, "signature": str(chrf.get_signature())},
        "tokenized_bleu": ours,
        **({"tokenized_bleu_wmt": wmt} if ours is not wmt else {}),
    }


def sacrebleu_score(result) -> float:
    """sacreBLEU's corpus BLEU (a `BLEUScore` of our settings: exp smoothing, no effective order)
    from its own brevity penalty and precisions, with its log-precisions added left to right
    (`records.added`): sacreBLEU adds them with sum(), whose last bits differ between Python 3.11
    and 3.12+. Its own figure and ours agree to rounding, which is checked."""
    if not any(result.counts):
        score = 0.0
    else:
        score = result.bp * math.exp(
            records.added(math.log(p) if p > 0 else -9999999999 for p in result.precisions) / 4
        )
    if not math.isclose(score, result.score, rel_tol=1e-12, abs_tol=1e-12):
        raise RuntimeError(f"sacreBLEU {sacrebleu.__version__} computes BLEU otherwise ({result.score} here {score})")
    return score


def reference_said(scores: dict) -> str:
    """What the score's line says of the tokenized BLEU's reference, where it is not WMT's."""
    ours = scores["tokenized_bleu"]
    if ours["reference"] == "wmt":
        return ""
    return (
        f' against {paper.REFERENCE[ours["reference"]]} ({ours["quotes_changed"]:,} „ “ ” as "; '
        f"{scores['tokenized_bleu_wmt']['score']:.2f} against {paper.REFERENCE['wmt']})"
    )


def reference_cells(scores: dict | None) -> dict:
    """Table 2's cells beside a score's tokenized BLEU: `bleu_reference`, the reference it was scored
    against ("t2t" or "wmt"; a score written before the reference was named was WMT's), and
    `bleu_wmt`, the same BLEU against WMT's reference."""
    if scores is None:
        return {"bleu_reference": None, "bleu_wmt": None}
    reference = scores["tokenized_bleu"].get("reference", "wmt")
    wmt = scores["tokenized_bleu"] if reference == "wmt" else scores.get("tokenized_bleu_wmt", {})
    return {"bleu_reference": reference, "bleu_wmt": wmt.get("score")}


def paired_bootstrap_p(ref: list[str], base: list[str], system: list[str], samples: int) -> float:
    """sacreBLEU's paired bootstrap resampling (Koehn 2004): p-value of `system`'s BLEU against `base`'s."""
    test = PairedTest(
        [("base", base), ("system", system)],
        {"BLEU": sacrebleu.metrics.BLEU()},
        references=[ref],
        test_type="bs",
        n_samples=samples,
    )
    _, out = test()
    return out["BLEU"][1].p_value


def score_file(
    task: str,
    hyp_path,
    ref_path,
    out,
    *,
    scoring: dict,
    expect_lines: int | None = None,
    chain: dict | None = None,
    log=print,
) -> dict:
    """Score one decoded test set and write the scores (JSON): for translation both BLEU protocols
    and chrF (`scoring`: moses_lang, compound_split, sacrebleu_tokenize, reference), for parsing EVALB of the
    restored parses against the gold trees. `chain`, the run's row (Study.evaluation_chain), gets
    one log line: its decoding, averaging and BLEU tokenization against the paper's row. Returns the
    scores."""
    if chain is not None:
        log(paper.chain_line(chain))
    translation = task != "parsing"
    # a byte-order mark is text to tokenizer.perl and to sacreBLEU's command line: the protocol keeps it
    hyp, ref = (list(read_lines(p, keep_bom=translation)) for p in (hyp_path, ref_path))
    check_lines(hyp, ref, hyp_path, ref_path, expect=expect_lines)
    if not translation:
        return score_parse_file(hyp, ref, hyp_path, ref_path, out=out, log=log)
    scores = bleu_scores(
        hyp,
        ref,
        moses_lang=scoring["moses_lang"],
        compound_split=scoring["compound_split"],
        sacrebleu_tokenize=scoring["sacrebleu_tokenize"],
        reference=scoring.get("reference", "wmt"),
    )
    scores.update(hyp=str(hyp_path), ref=str(ref_path))
    scores["input_dependence"] = dependence.measure(hyp, ref)
    if scores["tokenized_bleu"]["status"]:
        raise UserError(
            f"{ref_path}: no word on any of its {len(ref)} lines, nothing to score against (multi-bleu.perl prints "
            f"'{NO_REFERENCE_WORD}' and exits 1 here); give the test set's reference"
        )
    records.write(out, "translation score", scores)
    for path, lines in ((hyp_path, hyp), (ref_path, ref)):
        if lines[0].startswith("\ufeff"):
            log(
                f"{path}: starts with a byte-order mark, which the paper's protocol keeps as tokenizer.perl and "
                "sacreBLEU's command line do (a token of its own in the tokenized BLEU): remove it if it is not text"
            )
    if scores["input_dependence"]["ignores_input"]:
        log(dependence.said(scores["input_dependence"], str(hyp_path)))
    if scores["tokenized_bleu"]["empty_output"]:
        log(f"{hyp_path}: the output is empty (no word on any of its {len(hyp)} lines): BLEU 0.00")
    log(
        f"{hyp_path}: tokenized BLEU {scores['tokenized_bleu']['score']:.2f}{reference_said(scores)}, "
        f"sacreBLEU {scores['sacrebleu']['score']:.2f} ({scores['sacrebleu']['signature']}), {scores['lines']} lines"
    )
    return scores


def score_parse_file(hyp: list[str], ref: list[str], hyp_path, ref_path, *, out, log=print) -> dict:
    """`score_file` for parses: EVALB of the restored parses `hyp` against the gold trees `ref`."""
    try:
        scores = score_parses(hyp, ref)
    except UserError as exc:
        raise UserError(f"{ref_path}: {exc}") from None
    scores.update(hyp=str(hyp_path), ref=str(ref_path), lines=len(hyp))
    scores["input_dependence"] = dependence.measure(hyp, ref, parsing=True)
    records.write(out, "parsing score", scores)
    if scores["input_dependence"]["ignores_input"]:
        log(dependence.said(scores["input_dependence"], str(hyp_path)))
    for message in gold_error_lines(scores, ref_path):
        log(message)
    s = scores["all"]
    log(
        f"{hyp_path}: EVALB F1 {s['f1']:.2f} (P {s['precision']:.2f}, R {s['recall']:.2f}), "
        f"{s['error_sentences']} error sentence(s)"
    )
    return scores
