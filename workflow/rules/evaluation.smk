# Decoding (§6.1 beam 4, alpha 0.6; §6.3 beam 21, alpha 0.3), scoring (both BLEU protocols for
# translation, EVALB for parsing), the selection of a tuning grid's best candidate on the dev set
# (§6.3) and the export of a model for use elsewhere (aiayn.evaluation).


rule translate:
    input:
        model=get_decoded_model,
        src=get_source,
        spm_src=get_spm_src,
        spm_tgt=get_spm_tgt,
    output:
        LAYOUT.translation("{experiment}", "{testset}", "{lang}"),
    log:
        LAYOUT.log("translate", "{experiment}.{testset}.{lang}"),
    benchmark:
        LAYOUT.benchmark("translate", "{experiment}.{testset}.{lang}")
    wildcard_constraints:
        testset=_alternatives(_eval_sets(None)),
        lang="[A-Za-z]+",
    conda:
        "../../envs/torch.yaml"
    threads: 4
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=120,
    params:
        decode=get_decode,
    shell:
        "python -m aiayn translate --model {input.model:q} --input {input.src:q} --spm-src {input.spm_src:q}"
        " --spm-tgt {input.spm_tgt:q} --decode {params.decode:q} --out {output:q} --log-to {log:q} 2>> {log:q}"


rule score:
    input:
        hyp=get_hypotheses,
        ref=get_reference,
    output:
        LAYOUT.score("{experiment}", "{testset}"),
    log:
        LAYOUT.log("score", "{experiment}.{testset}"),
    wildcard_constraints:
        testset=_alternatives(_eval_sets(None)),
    conda:
        "../../envs/score.yaml"
    params:
        task=lambda w: STUDY.experiment(w.experiment)["task"],
        expect=get_expect_lines,
        scoring=lambda w: as_param(STUDY.bleu_scoring(get_dataset(w))),
        chain=lambda w: as_param(STUDY.evaluation_chain(w.experiment, w.testset)),
    shell:
        "python -m aiayn score --task {params.task:q} --hyp {input.hyp:q} --ref {input.ref:q}"
        " --scoring {params.scoring:q} --paper-row {params.chain:q} {params.expect:q} --out {output:q}"
        " >> {log:q} 2>&1"


# Selection on the dev set (§6.3): an experiment with a `tune` grid is not trained itself; its
# candidates are, each is decoded and scored on the dev set, and the best becomes its model.
rule select:
    input:
        scores=lambda w: [c["score"] for c in get_candidates(w)],
        models=lambda w: [c["model"] for c in get_candidates(w)],
    output:
        model=LAYOUT.final_checkpoint("{experiment}"),
        metrics=LAYOUT.metrics("{experiment}"),
        record=LAYOUT.selected("{experiment}"),
    log:
        LAYOUT.log("select", "{experiment}"),
    wildcard_constraints:
        experiment=_alternatives(STUDY.selected),
    conda:
        "../../envs/data.yaml"
    params:
        candidates=lambda w: as_param(get_candidates(w)),
    shell:
        "python -m aiayn select --candidates {params.candidates:q} --out-model {output.model:q}"
        " --out-metrics {output.metrics:q} --record {output.record:q} >> {log:q} 2>&1"


# The Table 2 models leave the pipeline: a Hugging Face MarianMTModel folder per experiment, with
# its tokenizer, generation config and model card, and a CTranslate2 model converted from it
# (`snakemake export`; the default target does not need transformers or ctranslate2).
rule export:
    input:
        model=get_test_model,
        spm_src=get_spm_src,
        spm_tgt=get_spm_tgt,
        score=get_test_score,
    output:
        hf=directory(LAYOUT.export("{experiment}")),
        ct2=directory(LAYOUT.export_ct2("{experiment}")),
    log:
        LAYOUT.log("export", "{experiment}"),
    wildcard_constraints:
        experiment=_alternatives(STUDY.in_table(2)),
    conda:
        "../../envs/export.yaml"
    params:
        decode=get_decode,
        card=lambda w: as_param(STUDY.model_card(w.experiment)),
    shell:
        "python -m aiayn export --model {input.model:q} --spm-src {input.spm_src:q} --spm-tgt {input.spm_tgt:q}"
        " --decode {params.decode:q} --card {params.card:q} --out {output.hf:q}"
        " --ctranslate2 {output.ct2:q} >> {log:q} 2>&1"
