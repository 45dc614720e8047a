# Figures for `snakemake --report`: learning curves, learning-rate schedule, attention maps.


rule figures:
    input:
        model=LAYOUT.final_checkpoint("{experiment}"),
        seed_models=get_seed_models,  # the row's other seeds, whose dev perplexity is drawn too
        spm_src=get_spm_src,
        dev_src=get_dev_src,
    output:
        curves=report(
            LAYOUT.figure("{experiment}", "learning_curves.png"),
            caption="../report/learning_curves.rst",
            category="Training",
            subcategory="{experiment}",
        ),
        lr=report(
            LAYOUT.figure("{experiment}", "learning_rate.png"),
            caption="../report/learning_rate.rst",
            category="Training",
            subcategory="{experiment}",
        ),
        attention=report(
            LAYOUT.figure("{experiment}", "attention.png"),
            caption="../report/attention.rst",
            category="Attention",
            subcategory="{experiment}",
        ),
    log:
        LAYOUT.log("figures", "{experiment}"),
    conda:
        "../../envs/torch.yaml"
    params:
        metrics=lambda w: LAYOUT.metrics(w.experiment),
        seeds=get_seed_metrics,
    shell:
        "python -m aiayn figures --name {wildcards.experiment:q} --metrics {params.metrics:q} --model {input.model:q}"
        " --seed-metrics {params.seeds:q}"
        " --spm-src {input.spm_src:q} --dev-src {input.dev_src:q} --curves {output.curves:q} --lr-plot {output.lr:q}"
        " --attention {output.attention:q} >> {log:q} 2>&1"
