"""The evaluation stage (§6): trained models in, translations and scores out. `translate` decodes
a test set with beam search, `score` computes both BLEU protocols (and EVALB for parses),
`moses` is the tokenizer of the paper's BLEU (tokenizer.perl of 2017), `replicates` the statistics
over seeds (mean, s_sel, the stratified test of Table 3), `baselines` scores trivial systems the
models must beat, `select` takes the best candidate of a tuning grid on the dev set (§6.3),
`export` writes a model for Hugging Face and CTranslate2, `dependence` says whether a model's
output depends on its input (one that ignores it is no result).
Called by the rules of evaluation.smk, each named as its module (translate, score, select,
export); writes results/<experiment>/<testset>.<lang>, <testset>.score.json, selected.json, hf/.
"""
