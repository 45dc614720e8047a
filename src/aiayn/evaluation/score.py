"""Scores of a decoded test set: BLEU both ways the field reports it, and EVALB for parses.

- sacreBLEU on detokenized text (13a, mixed case), with its signature, and chrF;
- the paper-comparable tokenized BLEU of tensor2tensor (the paper's code: its get_ende_bleu.sh):
  Moses tokenization of hypothesis and reference, for EN-DE every intra-word hyphen rewritten as
  ' ##AT##-##AT## ' (one pass, as the perl one-liner does), then BLEU on the tokens (sacreBLEU
  with tokenize="none");
- `score_file` scores one test set's file (parses by `aiayn.parsing.evalb.score_parses`), and
  `paired_bootstrap_p` compares two systems (Table 3).
"""

from __future__ import annotations

import re

import sacrebleu
from sacrebleu.significance import PairedTest
from sacremoses import MosesTokenizer

from aiayn.data.corpus import read_lines
from aiayn.errors import UserError
from aiayn.io import write_json
from aiayn.parsing.evalb import score_parses

COMPOUND = re.compile(rb"(\S)-(\S)")


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
    """Moses `tokenizer.perl -l LANG` (with its default escaping), then the compound split if asked."""
    tok = MosesTokenizer(lang=lang)
    out = [tok.tokenize(line, return_str=True, escape=True) for line in lines]
    return [compound_split(line) for line in out] if split_compounds else out


def check_lines(hyp: list[str], ref: list[str], hyp_name: str, ref_name: str, expect: int | None) -> None:
    if not ref:
        raise UserError(f"{ref_name}: no lines to score; is it the test set's reference, written whole?")
    if len(hyp) != len(ref):
        raise UserError(f"{hyp_name} has {len(hyp)} lines but {ref_name} has {len(ref)}; they must align line by line")
    if expect is not None and len(ref) != expect:
        raise UserError(f"{ref_name} has {len(ref)} lines, the test set has {expect} (a filtered or partial set?)")


def bleu_scores(
    hyp: list[str], ref: list[str], *, moses_lang: str, compound_split: bool, sacrebleu_tokenize: str
) -> dict:
    """Both BLEU protocols and chrF for aligned hypothesis and reference lines."""
    bleu = sacrebleu.metrics.BLEU(tokenize=sacrebleu_tokenize)
    detok = bleu.corpus_score(hyp, [ref])
    chrf = sacrebleu.metrics.CHRF()
    chrf_score = chrf.corpus_score(hyp, [ref])
    tok_bleu = sacrebleu.metrics.BLEU(tokenize="none", force=True)
    tokenized = tok_bleu.corpus_score(
        paper_tokenize(hyp, moses_lang, compound_split), [paper_tokenize(ref, moses_lang, compound_split)]
    )
    return {
        "lines": len(hyp),
        "sacrebleu": {
            "score": detok.score,
            "signature": str(bleu.get_signature()),
            "bp": detok.bp,
            "hyp_len": detok.sys_len,
            "ref_len": detok.ref_len,
            "precisions": detok.precisions,
        },
        "chrf": {"score": chrf_score.score, "signature": str(chrf.get_signature())},
        "tokenized_bleu": {
            "score": tokenized.score,
            "moses_lang": moses_lang,
            "compound_split": compound_split,
            "bp": tokenized.bp,
            "hyp_len": tokenized.sys_len,
            "ref_len": tokenized.ref_len,
            "precisions": tokenized.precisions,
        },
    }


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
    task: str, hyp_path, ref_path, out, *, scoring: dict, expect_lines: int | None = None, log=print
) -> dict:
    """Score one decoded test set and write the scores (JSON): for translation both BLEU protocols
    and chrF (`scoring`: moses_lang, compound_split, sacrebleu_tokenize), for parsing EVALB of the
    restored parses against the gold trees. Returns the scores."""
    hyp, ref = list(read_lines(hyp_path)), list(read_lines(ref_path))
    check_lines(hyp, ref, hyp_path, ref_path, expect_lines)
    if task == "parsing":
        scores = score_parses(hyp, ref)
        scores.update(hyp=str(hyp_path), ref=str(ref_path), lines=len(hyp))
        write_json(out, scores)
        s = scores["all"]
        log(
            f"{hyp_path}: EVALB F1 {s['f1']:.2f} (P {s['precision']:.2f}, R {s['recall']:.2f}), "
            f"{s['error_sentences']} error sentence(s)"
        )
        return scores
    scores = bleu_scores(
        hyp,
        ref,
        moses_lang=scoring["moses_lang"],
        compound_split=scoring["compound_split"],
        sacrebleu_tokenize=scoring["sacrebleu_tokenize"],
    )
    scores.update(hyp=str(hyp_path), ref=str(ref_path))
    write_json(out, scores)
    log(
        f"{hyp_path}: tokenized BLEU {scores['tokenized_bleu']['score']:.2f}, "
        f"sacreBLEU {scores['sacrebleu']['score']:.2f} ({scores['sacrebleu']['signature']}), {scores['lines']} lines"
    )
    return scores
