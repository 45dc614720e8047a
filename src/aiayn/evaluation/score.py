"""BLEU both ways the field reports it ("BLEU as the paper measured it" in paper.md).

- sacreBLEU on detokenized text (13a, mixed case), with its signature, and chrF;
- the paper-comparable tokenized BLEU of tensor2tensor: Moses tokenization of hypothesis and
  reference, for EN-DE every intra-word hyphen rewritten as ' ##AT##-##AT## ' (one pass, as the
  perl one-liner does), then BLEU on the tokens (sacreBLEU with tokenize="none").
"""

from __future__ import annotations

import re

import sacrebleu
from sacrebleu.significance import PairedTest
from sacremoses import MosesTokenizer

from aiayn.errors import UserError

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
    hyp: list[str], ref: list[str], *, moses_lang: str, compound_split: bool, sacrebleu_tokenize: str = "13a"
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
