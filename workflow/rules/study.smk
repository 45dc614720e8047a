# The study (aiayn.study): each experiment's resolved settings, the one input of its training.
localrules:
    resolve,


rule resolve:
    output:
        LAYOUT.experiment_json("{experiment}"),
    log:
        LAYOUT.log("resolve", "{experiment}"),
    conda:
        "../../envs/data.yaml"
    params:
        settings=lambda w: as_param(STUDY.training_settings(w.experiment)),
    shell:
        "python -m aiayn resolve --settings {params.settings:q} --out {output:q} >> {log:q} 2>&1"
