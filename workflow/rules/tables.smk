# Tables 2, 3 and 4 of the paper, ours beside the paper's numbers.
localrules:
    table,


rule table:
    input:
        scores=lambda w: [
            LAYOUT.score(e.experiment, e.testset) for e in STUDY.evaluations(int(w.n))
        ],
    output:
        md=LAYOUT.table("{n}", "md"),
        csv=LAYOUT.table("{n}", "csv"),
    log:
        LAYOUT.log("table", "table{n}"),
    wildcard_constraints:
        n="[234]",
    conda:
        "../../envs/report.yaml"
    params:
        results=lambda w, output: os.path.dirname(os.path.dirname(output.md)),
    shell:
        "python -m aiayn tables --table {wildcards.n} --results {params.results}"
        " --out-md {output.md} --out-csv {output.csv} >> {log} 2>&1"
