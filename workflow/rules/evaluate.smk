# Decoding (§6.1 beam 4, alpha 0.6; §6.3 beam 21, alpha 0.3) and scoring: both BLEU protocols
# for translation, EVALB for parsing.


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
        scoring=lambda w: json.dumps(STUDY.scoring(get_dataset(w))),
    shell:
        "python -m aiayn score --task {params.task:q} --hyp {input.hyp:q} --ref {input.ref:q}"
        " --scoring {params.scoring:q} {params.expect:q} --out {output:q} >> {log:q} 2>&1"
