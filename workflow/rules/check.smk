# The check stage (aiayn.check): a few real updates of the experiment's own trainer and a search of
# its own decoder, on a sample of its training data, compared as a whole with the paper written again
# (data, training, schedule, decoding, initialisation). Seconds to minutes on a CPU: a failed check
# stops the experiment here, before it costs a GPU hour.
rule check:
    input:
        settings=LAYOUT.experiment_json("{experiment}"),
        train=get_train_encoded,
    output:
        LAYOUT.check("{experiment}"),
    log:
        LAYOUT.log("check", "{experiment}"),
    wildcard_constraints:
        experiment=_alternatives(STUDY.trained),
    conda:
        "../../envs/torch.yaml"
    threads: 2
    resources:
        mem_mb=17000,  # MiB (Slurm's --mem): twice the big model's measured 8.16 GiB (docs/falls-short.md)
        runtime=15,
    params:
        # the modules that build and train the model (aiayn.study.code): changed, every check runs
        # again (a finished train takes check.json as ancient: nothing is retrained for it)
        code=CHECKED_CODE,
    shell:
        "python -m aiayn check --settings {input.settings:q} --train {input.train:q} --out {output:q}"
        " --log-to {log:q} 2>> {log:q}"
