# Tables 2, 3 and 4 of the paper, ours beside the paper's numbers.
localrules:
    table,


# Table 1 (§4), measured on the rule's machine: FLOPs, time, sequential steps, path lengths.
rule measure_table1:
    output:
        md=report(
            LAYOUT.table(1, "md"), caption="../report/table1.rst", category="Tables"
        ),
        csv=report(
            LAYOUT.table(1, "csv"), caption="../report/table1.rst", category="Tables"
        ),
        figure=report(
            LAYOUT.table(1, "png"), caption="../report/table1.rst", category="Tables"
        ),
    log:
        LAYOUT.log("table", "table1"),
    conda:
        "../../envs/torch.yaml"
    threads: 2
    params:
        settings=json.dumps(config["table1"]),
    shell:
        "python -m aiayn table1 --settings {params.settings:q} --threads {threads} --out-md {output.md:q}"
        " --out-csv {output.csv:q} --figure {output.figure:q} >> {log:q} 2>&1"


rule table:
    input:
        scores=lambda w: get_table_scores(int(w.n)),
    output:
        md=report(
            LAYOUT.table("{n}", "md"),
            caption="../report/table.rst",
            category="Tables",
        ),
        csv=report(
            LAYOUT.table("{n}", "csv"),
            caption="../report/table.rst",
            category="Tables",
        ),
    log:
        LAYOUT.log("table", "table{n}"),
    wildcard_constraints:
        n="[234]",
    conda:
        "../../envs/report.yaml"
    params:
        results=lambda w, output: os.path.dirname(os.path.dirname(output.md)),
        experiments=lambda w: json.dumps(STUDY.table_spec(int(w.n))),
        bootstrap=lambda w: (
            config["scoring"]["bootstrap_resamples"] if w.n == "3" else 0
        ),
        baselines=["--baselines"] if config["baselines"] else [],
        study=STUDY_SOURCES,
    shell:
        "python -m aiayn tables --table {wildcards.n:q} --results {params.results:q}"
        " --experiments {params.experiments:q} --bootstrap {params.bootstrap:q} {params.baselines:q}"
        " --study {params.study:q} --out-md {output.md:q} --out-csv {output.csv:q} >> {log:q} 2>&1"
