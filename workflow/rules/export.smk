# The Table 2 models leave the pipeline: a Hugging Face MarianMTModel folder per experiment, with
# its tokenizer, generation config and model card, and a CTranslate2 model converted from it
# (`snakemake export`; the default target does not need transformers or ctranslate2).


rule export_model:
    input:
        model=lambda w: LAYOUT.model(
            w.experiment, STUDY.model_for(w.experiment, get_test_set(w.experiment))
        ),
        spm_src=lambda w: LAYOUT.spm(get_dataset(w), "src"),
        spm_tgt=lambda w: LAYOUT.spm(get_dataset(w), "tgt"),
        score=lambda w: LAYOUT.score(w.experiment, get_test_set(w.experiment)),
    output:
        hf=directory(LAYOUT.export("{experiment}")),
        ct2=directory(LAYOUT.export("{experiment}") + "-ct2"),
    log:
        LAYOUT.log("export", "{experiment}"),
    wildcard_constraints:
        experiment=_alternatives(STUDY.in_table(2)),
    conda:
        "../../envs/export.yaml"
    params:
        decode=lambda w: json.dumps(STUDY.experiment(w.experiment)["decode"]),
        card=lambda w, input: json.dumps(get_model_card(w.experiment, input)),
    shell:
        "python -m aiayn export --model {input.model} --spm-src {input.spm_src} --spm-tgt {input.spm_tgt}"
        " --decode {params.decode:q} --card {params.card:q} --out {output.hf}"
        " --ctranslate2 {output.ct2} >> {log} 2>&1"
