# Penn Treebank WSJ (§6.3): the user's licensed copy -> sentences and linearized trees per split.
# Vocabulary, encoding, training and decoding are the shared rules of data.smk / training.smk / evaluation.smk.


rule prepare_treebank:
    input:
        archive=get_treebank_archive,
    output:
        src=LAYOUT.text("{dataset}", "{split}", "src"),
        tgt=LAYOUT.text("{dataset}", "{split}", "tgt"),
        gold=LAYOUT.text("{dataset}", "{split}", "gold"),
    log:
        LAYOUT.log("prepare_treebank", "{dataset}.{split}"),
    wildcard_constraints:
        dataset=_alternatives(STUDY.datasets("parsing")),
        split=_alternatives({"train"} | _eval_sets("parsing")),
    conda:
        "../../envs/data.yaml"
    params:
        dataset=lambda w: as_param(STUDY.treebank_settings(w.dataset)),
        treebank_archive=lambda w, input: (
            ["--treebank-archive", input.archive[0]] if input.archive else []
        ),
    shell:
        "python -m aiayn prepare-treebank --dataset {params.dataset:q} --split {wildcards.split:q}"
        " --src {output.src:q} --tgt {output.tgt:q} --gold {output.gold:q} {params.treebank_archive:q}"
        " >> {log:q} 2>&1"
