# Decoding (§6.1 beam 4, alpha 0.6; §6.3 beam 21, alpha 0.3) and scoring: both BLEU protocols
# for translation, EVALB for parsing.


rule translate:
    input:
        model=lambda w: LAYOUT.model(
            w.experiment, STUDY.model_for(w.experiment, w.testset)
        ),
        src=lambda w: LAYOUT.text(get_dataset(w), w.testset, "src"),
        spm_src=lambda w: LAYOUT.spm(get_dataset(w), "src"),
        spm_tgt=lambda w: LAYOUT.spm(get_dataset(w), "tgt"),
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
        decode=lambda w: json.dumps(STUDY.experiment(w.experiment)["decode"]),
    shell:
        "python -m aiayn translate --model {input.model} --input {input.src} --spm-src {input.spm_src}"
        " --spm-tgt {input.spm_tgt} --decode {params.decode:q} --out {output} >> {log} 2>&1"


rule score:
    input:
        hyp=lambda w: LAYOUT.translation(
            w.experiment, w.testset, target_lang(w.experiment)
        ),
        ref=lambda w: LAYOUT.text(
            get_dataset(w), w.testset, get_reference_side(w.experiment)
        ),
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
        expect=lambda w: get_expected_lines(w.experiment, w.testset),
        scoring=lambda w: json.dumps(
            {**config["scoring"], **STUDY.dataset(get_dataset(w)).get("scoring", {})}
        ),
    shell:
        "python -m aiayn score --task {params.task} --hyp {input.hyp} --ref {input.ref}"
        " --scoring {params.scoring:q} {params.expect} --out {output} >> {log} 2>&1"
