"""The paper's numbers, in one home: its setting behind each of its rows, to tell a run that
reproduces a row from one that only resembles it, §5.3's optimizer and rate, and the figures of
Tables 2, 3 and 4. The numbers are the paper's (Vaswani et al. 2017, arXiv:1706.03762 v5; the
section or table beside each), kept here and not read from config.yaml: a config's presets may be
anything (the demo's are 2-layer models). The schema takes its defaults of TRAINING's keys from here
(aiayn.study.config), and config.yaml's values of the paper's are tested equal to these.

`departures()` lists, for one experiment of Table 2, 3 or 4, everything that is not the paper's
setting: the tables print a delta against the paper only when the list is empty.
"""

from __future__ import annotations

# §5.3: Adam's beta1, beta2 and epsilon, and the warmup of lrate = d_model^-0.5 · min(step^-0.5,
# step · warmup_steps^-1.5); §5.4: label smoothing. The `train` settings' defaults (the schema leaves them out)
TRAINING = {"adam_beta1": 0.9, "adam_beta2": 0.98, "adam_eps": 1e-9, "warmup_steps": 4000, "eps_ls": 0.1}
# §3, §5.4, Table 3 (base and big rows); §6.3 (parser: "4 layers, d_model = 1024", the rest tuned on
# WSJ 22 or "as EN-DE base": only what the paper states is compared); init: the paper does not say,
# its code (tensor2tensor) is "t2t" (aiayn.model.hparams.INITS); big as Table 3 prints it: what differs from base
BASE = {
    "N": 6,
    "d_model": 512,
    "d_ff": 2048,
    "h": 8,
    "d_k": 64,
    "d_v": 64,
    "P_drop": 0.1,
    "eps_ls": TRAINING["eps_ls"],
    "positional": "sinusoidal",
    "pre_norm": False,
    "init": "t2t",
}
MODEL = {
    "base": BASE,
    "big": {**BASE, "d_model": 1024, "d_ff": 4096, "h": 16, "P_drop": 0.3},
    "parser": {"N": 4, "d_model": 1024, "positional": "sinusoidal", "pre_norm": False, "init": "t2t"},
}
# Table 3: each row letter's variations of base ("blank = as base"); Table 2: big EN-FR drops out 0.1 (§6.1)
VARIATIONS = {
    "A": [
        {"h": 1, "d_k": 512, "d_v": 512},
        {"h": 4, "d_k": 128, "d_v": 128},
        {"h": 16, "d_k": 32, "d_v": 32},
        {"h": 32, "d_k": 16, "d_v": 16},
    ],
    "B": [{"d_k": 16}, {"d_k": 32}],
    "C": [
        {"N": 2},
        {"N": 4},
        {"N": 8},
        {"d_model": 256, "d_k": 32, "d_v": 32},
        {"d_model": 1024, "d_k": 128, "d_v": 128},
        {"d_ff": 1024},
        {"d_ff": 4096},
    ],
    "D": [{"P_drop": 0.0}, {"P_drop": 0.2}, {"eps_ls": 0.0}, {"eps_ls": 0.2}],
    "E": [{"positional": "learned"}],
}
BIG_EN_FR = {"P_drop": 0.1}
# §5.1 (~25,000 source and ~25,000 target tokens per update: tokens_per_update is per side), §5.2 (steps), §5.3 (warmup)
TRAIN = {
    "base": {"steps": 100_000, "tokens_per_update": 25_000, "warmup_steps": TRAINING["warmup_steps"]},
    "big": {"steps": 300_000, "tokens_per_update": 25_000, "warmup_steps": TRAINING["warmup_steps"]},
    "parser": {},
}
# §5.2 and footnote 5: each training's hours on its GPUs (their FP32 peak: aiayn.runtime.hardware.PEAKS),
# on EN-DE's shared vocabulary of about 37,000 pieces (§5.1)
RUNS = {"base": {"hours": 12.0, "gpus": 8, "gpu": "P100"}, "big": {"hours": 3.5 * 24, "gpus": 8, "gpu": "P100"}}
VOCAB_EN_DE = 37_000
# §6.1 (translation), §6.3 (parsing)
DECODE = {
    "translation": {"beam": 4, "alpha": 0.6, "max_len_a": 1.0, "max_len_b": 50},
    "parsing": {"beam": 21, "alpha": 0.3, "max_len_a": 1.0, "max_len_b": 300},
}
AVERAGE = {"base": 5, "big": 20}  # §6.1, Table 2; Table 3 rows are not averaged
# how BLEU was measured (paper.md, "BLEU as the paper measured it"): tensor2tensor's tokenized BLEU,
# Moses-tokenized in the target language, compound-split for EN-DE only; for EN-DE against tensor2tensor's
# reference, newstest2014.de with its „ “ ” as " (tensorflow/tensor2tensor#317; aiayn.evaluation.score)
PROTOCOL = {
    ("en", "de"): {"moses_lang": "de", "compound_split": True, "reference": "t2t"},
    ("en", "fr"): {"moses_lang": "fr", "compound_split": False, "reference": "wmt"},
}
REFERENCE = {"wmt": "WMT's reference", "t2t": "the reference with t2t's quotes"}  # as a row's setting names them
TEST_SETS = {2: ("newstest2014", 3003), 3: ("newstest2013", 3000), 4: ("wsj23", 2416)}  # §5.1, §6.3
# training pairs after cleaning (§5.1: ~4.5M EN-DE, ~36M EN-FR; §6.3: WSJ 02-21, ~40K sentences)
TRAIN_PAIRS = {("en", "de"): 4.5e6, ("en", "fr"): 36e6, "parsing": 40e3}
PAIRS_TOLERANCE = 0.1
# The paper's figures of each experiment of the study (config.yaml's `paper:` of each, tested equal to
# these): Table 2 newstest2014 BLEU; Table 3 newstest2013 perplexity and BLEU, parameters in millions;
# Table 4 WSJ 23 F1. big-en-fr: 41.8 is Table 2's figure, the §6.1 text and the abstract say 41.0
FIGURES = {
    "base-en-de": {"bleu": 27.3, "dev_ppl": 4.92, "dev_bleu": 25.8, "params_m": 65},
    "big-en-de": {"bleu": 28.4, "dev_ppl": 4.33, "dev_bleu": 26.4, "params_m": 213},
    "base-en-fr": {"bleu": 38.1},
    "big-en-fr": {"bleu": 41.8},
    "t3-A-h1": {"dev_ppl": 5.29, "dev_bleu": 24.9},
    "t3-A-h4": {"dev_ppl": 5.00, "dev_bleu": 25.5},
    "t3-A-h16": {"dev_ppl": 4.91, "dev_bleu": 25.8},
    "t3-A-h32": {"dev_ppl": 5.01, "dev_bleu": 25.4},
    "t3-B-dk16": {"dev_ppl": 5.16, "dev_bleu": 25.1, "params_m": 58},
    "t3-B-dk32": {"dev_ppl": 5.01, "dev_bleu": 25.4, "params_m": 60},
    "t3-C-N2": {"dev_ppl": 6.11, "dev_bleu": 23.7, "params_m": 36},
    "t3-C-N4": {"dev_ppl": 5.19, "dev_bleu": 25.3, "params_m": 50},
    "t3-C-N8": {"dev_ppl": 4.88, "dev_bleu": 25.5, "params_m": 80},
    "t3-C-dm256": {"dev_ppl": 5.75, "dev_bleu": 24.5, "params_m": 28},
    "t3-C-dm1024": {"dev_ppl": 4.66, "dev_bleu": 26.0, "params_m": 168},
    "t3-C-dff1024": {"dev_ppl": 5.12, "dev_bleu": 25.4, "params_m": 53},
    "t3-C-dff4096": {"dev_ppl": 4.75, "dev_bleu": 26.2, "params_m": 90},
    "t3-D-drop0.0": {"dev_ppl": 5.77, "dev_bleu": 24.6},
    "t3-D-drop0.2": {"dev_ppl": 4.95, "dev_bleu": 25.5},
    "t3-D-ls0.0": {"dev_ppl": 4.67, "dev_bleu": 25.3},
    "t3-D-ls0.2": {"dev_ppl": 5.47, "dev_bleu": 25.7},
    "t3-E-learned": {"dev_ppl": 4.92, "dev_bleu": 25.7},
    "parse-wsj": {"f1": 91.3},
    "parse-semi": {"f1": 92.7},
}
# Table 2: the systems it compares (BLEU EN-DE, EN-FR; training cost in FLOPs EN-DE, EN-FR)
TABLE2 = [
    ("ByteNet", 23.75, None, None, None),
    ("Deep-Att + PosUnk", None, 39.2, None, 1.0e20),
    ("GNMT + RL", 24.6, 39.92, 2.3e19, 1.4e20),
    ("ConvS2S", 25.16, 40.46, 9.6e18, 1.5e20),
    ("MoE", 26.03, 40.56, 2.0e19, 1.2e20),
    ("Deep-Att + PosUnk Ensemble", None, 40.4, None, 8.0e20),
    ("GNMT + RL Ensemble", 26.30, 41.16, 1.8e20, 1.1e21),
    ("ConvS2S Ensemble", 26.36, 41.29, 7.7e19, 1.2e21),
    ("Transformer (base)", FIGURES["base-en-de"]["bleu"], FIGURES["base-en-fr"]["bleu"], 3.3e18, 3.3e18),
    ("Transformer (big)", FIGURES["big-en-de"]["bleu"], FIGURES["big-en-fr"]["bleu"], 2.3e19, 2.3e19),
]
# Table 4: the parsers it compares (WSJ section 23 F1)
TABLE4 = [
    ("Vinyals & Kaiser et al. (2014)", "WSJ only, discriminative", 88.3),
    ("Petrov et al. (2006)", "WSJ only, discriminative", 90.4),
    ("Zhu et al. (2013)", "WSJ only, discriminative", 90.4),
    ("Dyer et al. (2016)", "WSJ only, discriminative", 91.7),
    ("Transformer (4 layers)", "WSJ only, discriminative", FIGURES["parse-wsj"]["f1"]),
    ("Zhu et al. (2013)", "semi-supervised", 91.3),
    ("Huang & Harper (2009)", "semi-supervised", 91.3),
    ("McClosky et al. (2006)", "semi-supervised", 92.1),
    ("Vinyals & Kaiser et al. (2014)", "semi-supervised", 92.1),
    ("Transformer (4 layers)", "semi-supervised", FIGURES["parse-semi"]["f1"]),
    ("Luong et al. (2015)", "multi-task", 93.0),
    ("Dyer et al. (2016)", "generative", 93.3),
]


def _value(v) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def _mismatches(have: dict, want: dict) -> list[str]:
    whose = {"init": "paper's code"}  # a setting the paper does not state: its code's
    return [
        f"{k} {_value(have.get(k))} ({whose.get(k, 'paper')} {_value(v)})" for k, v in want.items() if have.get(k) != v
    ]


def paper_models(table: int, exp: dict) -> list[dict]:
    """The model settings (with eps_ls) the paper gives the experiment's row: one, or for a Table 3
    row letter each of its variations."""
    preset = exp["preset"]
    variations = [{}]
    if table == 3 and exp.get("row") in VARIATIONS:
        variations = VARIATIONS[exp["row"]]
    elif table == 2 and preset == "big" and tuple(exp.get("pair") or ()) == ("en", "fr"):
        variations = [BIG_EN_FR]
    return [{**MODEL[preset], **v} for v in variations]


def departures(table: int, exp: dict, *, updates: int, lines: int | None, train_pairs: int | None) -> list[str]:
    """What in this run is not the paper's setting of its row, each as a short phrase; [] if none.

    `exp` is the table spec of the experiment (aiayn.study.grid.Study.table_spec); `updates` the
    updates trained, `lines` the scored test set's lines, `train_pairs` the training pairs kept.
    """
    preset = exp["preset"]
    if preset not in MODEL:
        return [f"preset {preset!r} is not one of the paper's ({', '.join(MODEL)})"]
    have = {**exp["model"], "eps_ls": exp["train"]["eps_ls"]}
    out = min((_mismatches(have, want) for want in paper_models(table, exp)), key=len)
    steps = exp["train"]["steps"]
    if updates < steps:
        out.insert(0, f"{updates:,} of {steps:,} updates")
    out += _mismatches(exp["train"], TRAIN[preset])
    out += chain_departures(table, exp)
    testset, paper_lines = TEST_SETS[table]
    if exp["testset"] != testset:
        out.append(f"test set {exp['testset']} (paper {testset})")
    elif lines is not None and lines != paper_lines:
        out.append(f"{lines:,} test lines (paper {paper_lines:,})")
    key = "parsing" if exp["task"] == "parsing" else tuple(exp.get("pair") or ())
    paper_pairs = TRAIN_PAIRS.get(key)
    if paper_pairs is None:
        out.append(f"language pair {'-'.join(map(str, key)) or '?'} is not one of the paper's")
    elif train_pairs is None:
        out.append("training data not found")
    elif abs(train_pairs - paper_pairs) > PAIRS_TOLERANCE * paper_pairs:
        out.append(f"{train_pairs:,} training pairs (paper ~{paper_pairs:,.0f})")
    return out


def chain_departures(table: int, exp: dict) -> list[str]:
    """What in the evaluation chain of an experiment's row is not the paper's: decoding (beam, length
    penalty, length limit), checkpoint averaging, how BLEU is tokenized and its reference. `exp` needs "task",
    "preset", "decode", "average" and (translation) "pair" and "scoring"."""
    out = _mismatches(exp["decode"], DECODE[exp["task"]])
    averaged = AVERAGE.get(exp["preset"], 1) if table == 2 else 1
    if table in (2, 3) and exp["average"] != averaged:
        have = "no checkpoint averaging" if exp["average"] == 1 else f"{exp['average']} checkpoints averaged"
        out.append(f"{have} (paper {'none' if averaged == 1 else averaged})")
    protocol = PROTOCOL.get(tuple(exp.get("pair") or ()))
    if exp["task"] == "translation" and protocol is not None:
        scoring = exp.get("scoring") or {}
        if scoring.get("moses_lang") != protocol["moses_lang"]:
            out.append(f"BLEU tokenized as {scoring.get('moses_lang')} (paper: Moses -l {protocol['moses_lang']})")
        if bool(scoring.get("compound_split")) != protocol["compound_split"]:
            split = "with" if scoring.get("compound_split") else "without"
            out.append(f"BLEU {split} compound splitting (paper {'with' if protocol['compound_split'] else 'without'})")
        reference = scoring.get("reference", "wmt")
        if reference != protocol["reference"]:
            out.append(f"BLEU against {REFERENCE[reference]} (paper: {REFERENCE[protocol['reference']]})")
    return out


def chain_line(chain: dict) -> str:
    """The score step's line on its evaluation chain: `chain` is the experiment's row facts
    (aiayn.study.grid.Study.evaluation_chain: "table" and what `chain_departures` reads)."""
    table, name = chain["table"], chain.get("name", "this run")
    if chain["preset"] not in MODEL:
        return f"evaluation chain of {name}: preset {chain['preset']!r} has no paper row to compare with"
    found = chain_departures(table, chain)
    if found:
        return (
            f"evaluation chain of {name} departs from the paper's Table {table} row: {', '.join(found)} "
            "(its table row says so too)"
        )
    d = chain["decode"]
    averaged = f"{chain['average']} checkpoints averaged" if chain["average"] > 1 else "no averaging"
    protocol = PROTOCOL.get(tuple(chain.get("pair") or ()))
    how = ""
    if chain["task"] == "translation":
        split = " and compound-split" if protocol and protocol["compound_split"] else ""
        against = f" against {REFERENCE['t2t']}" if protocol and protocol["reference"] == "t2t" else ""
        how = (
            f", BLEU Moses-tokenized -l {protocol['moses_lang']}{split}{against}"
            if protocol
            else ", BLEU as configured (a language pair the paper did not score)"
        )
    return (
        f"evaluation chain of {name}: the paper's Table {table} row's (beam {d['beam']}, alpha {d['alpha']}, "
        f"{averaged}{how})"
    )


NOT_COMPARABLE = "not comparable: "  # how a `setting` cell begins the list of what is not the paper's


def setting(table: int, exp: dict, figure: str, **facts) -> tuple[bool, str]:
    """(comparable, the text of the row's `setting` cell): "the paper's", or why not."""
    if exp["paper"].get(figure) is None:
        return False, "no paper figure for this row"
    found = departures(table, exp, **facts)
    return (not found), ("the paper's" if not found else NOT_COMPARABLE + ", ".join(found))
