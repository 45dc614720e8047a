"""The evaluation stage (§6): trained models in, translations and scores out. `translate` decodes
a test set with beam search, `score` computes both BLEU protocols (and EVALB for parses),
`baselines` scores trivial systems the models must beat, `selection` takes the best candidate of
a tuning grid on the dev set (§6.3), `export` writes a model for Hugging Face and CTranslate2.
Called by the translate and score rules of evaluate.smk, select of train.smk and export_model of
export.smk; writes results/<experiment>/<testset>.<lang>, <testset>.score.json, selected.json, hf/.
"""
