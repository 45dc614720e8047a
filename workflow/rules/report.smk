# The report (aiayn.report): Table 1 measured, Tables 2, 3 and 4 of the paper with ours beside the
# paper's numbers, and the figures of `snakemake --report` (learning curves, learning rate, attention).
# The report lists its categories, and their subcategories, in alphabetical order: the numbers put the
# tables as the paper prints them first (their HTML pages and Table 1's figure; the report shows
# Markdown and CSV files as downloads only).
REPORT_TABLES = "1. Tables"
REPORT_AS_THE_PAPER = "1. As the paper prints them"
REPORT_EVERY_COLUMN = "2. Markdown and CSV (every column)"


localrules:
    tables,
    plan,


# Table 1 (§4), measured on the rule's machine: FLOPs, time, sequential steps, path lengths; as the
# paper prints it, ours under its rows (md, html), every column in the CSV.
rule table1:
    output:
        md=report(
            LAYOUT.table(1, "md"),
            caption="../report/table1.rst",
            category=REPORT_TABLES,
            subcategory=REPORT_EVERY_COLUMN,
        ),
        csv=report(
            LAYOUT.table(1, "csv"),
            caption="../report/table1.rst",
            category=REPORT_TABLES,
            subcategory=REPORT_EVERY_COLUMN,
        ),
        html=report(
            LAYOUT.table(1, "html"),
            caption="../report/table1.rst",
            category=REPORT_TABLES,
            subcategory=REPORT_AS_THE_PAPER,
        ),
        figure=report(
            LAYOUT.table(1, "png"),
            caption="../report/table1.rst",
            category=REPORT_TABLES,
            subcategory=REPORT_AS_THE_PAPER,
        ),
    log:
        LAYOUT.log("table1", "table1"),
    conda:
        "../../envs/torch.yaml"
    threads: 2
    params:
        settings=as_param(config["table1"]),
    shell:
        "python -m aiayn table1 --settings {params.settings:q} --threads {threads:q} --out-md {output.md:q}"
        " --out-csv {output.csv:q} --out-html {output.html:q} --figure {output.figure:q} >> {log:q} 2>&1"


rule tables:
    input:
        scores=lambda w: get_table_scores(int(w.n)),
    output:
        html=report(
            LAYOUT.table("{n}", "html"),
            caption="../report/table.rst",
            category=REPORT_TABLES,
            subcategory=REPORT_AS_THE_PAPER,
        ),
        md=report(
            LAYOUT.table("{n}", "md"),
            caption="../report/table.rst",
            category=REPORT_TABLES,
            subcategory=REPORT_EVERY_COLUMN,
        ),
        csv=report(
            LAYOUT.table("{n}", "csv"),
            caption="../report/table.rst",
            category=REPORT_TABLES,
            subcategory=REPORT_EVERY_COLUMN,
        ),
    log:
        LAYOUT.log("tables", "table{n}"),
    wildcard_constraints:
        n="[234]",
    conda:
        "../../envs/report.yaml"
    params:
        results=lambda w: LAYOUT.results,  # a function: Snakemake's lint takes a string for a hardcoded prefix
        experiments=lambda w: as_param(STUDY.table_spec(int(w.n))),
        bootstrap=lambda w: (
            config["scoring"]["bootstrap_resamples"] if w.n == "3" else 0
        ),
        baselines=["--baselines"] if config["baselines"] else [],
        study=STUDY_SOURCES,
    shell:
        "python -m aiayn tables --table {wildcards.n:q} --results {params.results:q}"
        " --experiments {params.experiments:q} --bootstrap {params.bootstrap:q} {params.baselines:q}"
        " --study {params.study:q} --out-md {output.md:q} --out-csv {output.csv:q} --out-html {output.html:q}"
        " >> {log:q} 2>&1"


# The study's cost before launch: GPU hours, checkpoint disk, memory against requests (aiayn.report.plan);
# the MFU measured by benchmarks/gpu.py where benchmarks/gpu.json holds one for the GPU planned for.
# GPUs per training and their model are the plan rule's resources: profiles/slurm gives it the
# training jobs' own (`plan: *training`); a GPU model that is not the profile's:
# --set-resources plan:gpu_model=H100.
rule plan:
    input:
        # what was measured, where it is: the plan is redone when the rehearsal or gpu.py writes it
        measured=lambda w: [
            p
            for p in (
                LAYOUT.rehearsal_costs(),
                os.path.join(workflow.basedir, "benchmarks", "gpu.json"),
            )
            if os.path.exists(p)
        ],
    output:
        LAYOUT.plan(),
    log:
        LAYOUT.log("plan", "plan"),
    conda:
        "../../envs/torch.yaml"
    resources:
        gpu=8,
        nodes=1,
        gpu_model="P100",
    params:
        experiments=as_param(STUDY.plan_spec()),
        requests=as_param(
            rule_requests(
                "train", "check", "translate", "vocab", "encode", "prepare", "average"
            )
        ),
        costs=LAYOUT.rehearsal_costs(),
        benchmark=os.path.join(workflow.basedir, "benchmarks", "gpu.json"),  # where benchmarks/gpu.py writes
    shell:
        "python -m aiayn plan --experiments {params.experiments:q} --gpu-model {resources.gpu_model:q}"
        " --gpus {resources.gpu:q} --nodes {resources.nodes:q} --requests {params.requests:q}"
        " --costs {params.costs:q} --benchmark {params.benchmark:q} --out {output:q} >> {log:q} 2>&1"


rule figures:
    input:
        model=LAYOUT.final_checkpoint("{experiment}"),
        seed_models=get_seed_models,  # the row's other seeds, whose dev perplexity is drawn too
        spm_src=get_spm_src,
        spm_tgt=get_spm_tgt,
        dev_src=get_dev_src,
        dev_tgt=get_dev_tgt,
    output:
        curves=report(
            LAYOUT.figure("{experiment}", "learning_curves.png"),
            caption="../report/learning_curves.rst",
            category="2. Training",
            subcategory="{experiment}",
        ),
        lr=report(
            LAYOUT.figure("{experiment}", "learning_rate.png"),
            caption="../report/learning_rate.rst",
            category="2. Training",
            subcategory="{experiment}",
        ),
        attention=report(
            LAYOUT.figure("{experiment}", "attention.png"),
            caption="../report/attention.rst",
            category="3. Attention",
            subcategory="{experiment}",
        ),
        cross=report(
            LAYOUT.figure("{experiment}", "cross_attention.png"),
            caption="../report/cross_attention.rst",
            category="3. Attention",
            subcategory="{experiment}",
        ),
        diagonal=LAYOUT.figure("{experiment}", "diagonal.json"),
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
        " --attention {output.attention:q} --spm-tgt {input.spm_tgt:q} --dev-tgt {input.dev_tgt:q}"
        " --cross-attention {output.cross:q} --diagonal {output.diagonal:q} >> {log:q} 2>&1"
