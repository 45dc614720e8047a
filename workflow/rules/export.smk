# The Table 2 models leave the pipeline: a Hugging Face MarianMTModel folder per experiment, with
# its tokenizer, generation config and model card, and a CTranslate2 model converted from it
# (`snakemake export`; the default target does not need transformers or ctranslate2).


rule export_model:
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
        card=lambda w: json.dumps(STUDY.model_card(w.experiment)),
    shell:
        "python -m aiayn export --model {input.model:q} --spm-src {input.spm_src:q} --spm-tgt {input.spm_tgt:q}"
        " --decode {params.decode:q} --card {params.card:q} --out {output.hf:q}"
        " --ctranslate2 {output.ct2:q} >> {log:q} 2>&1"
