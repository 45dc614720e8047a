# Training (§5) on GPU nodes, then averaging of the last K checkpoints (§6.1) (aiayn.training).


# GPUs per training job: the `gpu` resource (total over the job's `nodes`), set in the profile
# (profiles/slurm: 8, the paper's one machine with 8 GPUs) or with --set-resources train:gpu=N.
# Several nodes (or Slurm tasks): train:nodes=N, train:tasks=N, train:mpi=srun (aiayn.study.launch).
# The trainer derives gradient accumulation from the world size, so the tokens per update stay
# the paper's ~25k + 25k at any GPU count. Step checkpoints are not declared outputs, so a failed
# or preempted job keeps them and the next job resumes from the newest one.
# Time limits: in a Slurm job the trainer checkpoints `stop_margin_s` seconds before the job's time
# limit and requeues the job, which resumes when it runs again (aiayn.training.distributed). No Snakemake
# retries: a non-finite loss (exit 3) or a user error (exit 2) would fail again the same way;
# what a new attempt can fix, Slurm requeues (this self-requeue; preemption and node failures with
# --slurm-requeue, set in profiles/slurm).
rule train:
    input:
        # ancient once trained: a check run again (new code, --forcerun check) retrains nothing; a new
        # experiment.json or training data retrains as before; untrained, the check runs first
        check=get_check,
        settings=LAYOUT.experiment_json("{experiment}"),
        train=get_train_encoded,
        dev=get_dev_encoded,
        spm_src=get_spm_src,
        spm_tgt=get_spm_tgt,
    output:
        LAYOUT.final_checkpoint("{experiment}"),
    log:
        LAYOUT.log("train", "{experiment}"),
    benchmark:
        LAYOUT.benchmark("train", "{experiment}")
    wildcard_constraints:
        experiment=_alternatives(STUDY.trained),
    conda:
        "../../envs/torch.yaml"
    threads: 8
    resources:
        gpu=1,
        nodes=1,
        tasks=1,
        tasks_per_gpu=0,
        mem_mb=64000,
        runtime=24 * 60,
        stop_margin_s=300,
    params:
        launch=lambda w, resources: train_launcher(resources),
        checkpoints=get_checkpoints,
    shell:
        "{params.launch} -m aiayn train --settings {input.settings:q} --train {input.train:q} --dev {input.dev:q}"
        " --spm-src {input.spm_src:q} --spm-tgt {input.spm_tgt:q} --checkpoints {params.checkpoints:q}"
        " --stop-margin {resources.stop_margin_s:q} --out {output:q} --log-to {log:q} 2>> {log:q}"


rule average:
    input:
        LAYOUT.final_checkpoint("{experiment}"),
    output:
        model=LAYOUT.average("{experiment}"),
        record=LAYOUT.average_record("{experiment}"),
    log:
        LAYOUT.log("average", "{experiment}"),
    conda:
        "../../envs/torch.yaml"
    resources:
        mem_mb=16000,
        runtime=60,
    params:
        last=lambda w: STUDY.experiment(w.experiment)["average"],
        interval=lambda w: STUDY.experiment(w.experiment)["train"][
            "checkpoint_interval"
        ],
        final=lambda w: STUDY.experiment(w.experiment)["train"]["steps"],
        checkpoints=get_checkpoints,
    shell:
        "python -m aiayn average --checkpoints {params.checkpoints:q} --last {params.last:q}"
        " --interval {params.interval:q} --final-step {params.final:q}"
        " --out {output.model:q} --record {output.record:q} >> {log:q} 2>&1"
