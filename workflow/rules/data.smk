# WMT14 (§5.1): download -> extract, assemble, clean -> sentencepiece vocabulary -> encode.
localrules:
    download,
    generate,
    vocab_info,


rule download:
    output:
        LAYOUT.download("{archive_file}"),
    log:
        LAYOUT.log("download", "{archive_file}"),
    wildcard_constraints:
        archive_file=_alternatives(set(ARCHIVE_FILES) - GENERATED),
    retries: 2
    conda:
        "../../envs/data.yaml"
    params:
        url=get_url,
        sha256=lambda w: get_archive(w)["sha256"],
        size=get_size_flag,
    shell:
        "python -m aiayn download --url {params.url:q} --sha256 {params.sha256:q} {params.size:q}"
        " --out {output:q} >> {log:q} 2>&1"


# The offline demo's archives (archives.<name>.generate): made, not downloaded; the rest is unchanged.
rule generate:
    output:
        LAYOUT.download("{archive_file}"),
    log:
        LAYOUT.log("generate", "{archive_file}"),
    wildcard_constraints:
        archive_file=_alternatives(GENERATED),
    conda:
        "../../envs/data.yaml"
    params:
        spec=lambda w: as_param(
            config["archives"][ARCHIVE_FILES[w.archive_file]]["generate"]
        ),
    shell:
        "python -m aiayn generate --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


rule prepare:
    input:
        archives=lambda w: get_archive_files(w.dataset, "train"),
        local=lambda w: STUDY.local_files(w.dataset, "train"),
    output:
        src=LAYOUT.text("{dataset}", "train", "src"),
        tgt=LAYOUT.text("{dataset}", "train", "tgt"),
        report=LAYOUT.train_report("{dataset}"),
    log:
        LAYOUT.log("prepare", "{dataset}"),
    benchmark:
        LAYOUT.benchmark("prepare", "{dataset}")
    wildcard_constraints:
        dataset=_alternatives(STUDY.datasets("translation")),
    conda:
        "../../envs/data.yaml"
    params:
        corpora=lambda w: as_param(STUDY.dataset(w.dataset)["train"]),
        archives=lambda w: as_param(get_archive_map(w.dataset, "train")),
        cleaning=as_param(config["cleaning"]),
    shell:
        "python -m aiayn prepare --corpora {params.corpora:q} --cleaning {params.cleaning:q}"
        " --archives {params.archives:q} --src {output.src:q} --tgt {output.tgt:q} --report {output.report:q}"
        " >> {log:q} 2>&1"


rule prepare_eval:
    input:
        archives=lambda w: get_archive_files(w.dataset, w.evalset),
        local=lambda w: STUDY.local_files(w.dataset, w.evalset),
    output:
        src=LAYOUT.text("{dataset}", "{evalset}", "src"),
        tgt=LAYOUT.text("{dataset}", "{evalset}", "tgt"),
    log:
        LAYOUT.log("prepare_eval", "{dataset}.{evalset}"),
    wildcard_constraints:
        dataset=_alternatives(STUDY.datasets("translation")),
        evalset=_alternatives(_eval_sets("translation")),
    conda:
        "../../envs/data.yaml"
    params:
        spec=lambda w: as_param(STUDY.dataset(w.dataset)["eval_sets"][w.evalset]),
        archive=lambda w, input: (
            ["--archive", input.archives[0]] if input.archives else []
        ),
    shell:
        "python -m aiayn prepare-eval --spec {params.spec:q} --name {wildcards.evalset:q} --dataset {wildcards.dataset:q}"
        " {params.archive:q} --src {output.src:q} --tgt {output.tgt:q} >> {log:q} 2>&1"


rule vocab:
    input:
        src=LAYOUT.text("{dataset}", "train", "src"),
        tgt=LAYOUT.text("{dataset}", "train", "tgt"),
    output:
        src=LAYOUT.spm("{dataset}", "src"),
        tgt=LAYOUT.spm("{dataset}", "tgt"),
    log:
        LAYOUT.log("vocab", "{dataset}"),
    benchmark:
        LAYOUT.benchmark("vocab", "{dataset}")
    conda:
        "../../envs/data.yaml"
    threads: 8
    resources:
        mem_mb=32000,
        runtime=240,
    params:
        vocab=get_vocab_settings,
    shell:
        "python -m aiayn vocab --vocab {params.vocab:q} --threads {threads:q} --train-src {input.src:q}"
        " --train-tgt {input.tgt:q} --out-src {output.src:q} --out-tgt {output.tgt:q} >> {log:q} 2>&1"


# What the vocabularies hold against what was asked (sentencepiece makes fewer pieces, without
# failing, when the text cannot support more): results/data/<dataset>/vocab.json.
rule vocab_info:
    input:
        src=LAYOUT.text("{dataset}", "train", "src"),
        tgt=LAYOUT.text("{dataset}", "train", "tgt"),
        spm_src=LAYOUT.spm("{dataset}", "src"),
        spm_tgt=LAYOUT.spm("{dataset}", "tgt"),
    output:
        LAYOUT.vocab_info("{dataset}"),
    log:
        LAYOUT.log("vocab_info", "{dataset}"),
    conda:
        "../../envs/data.yaml"
    params:
        vocab=get_vocab_settings,
    shell:
        "python -m aiayn vocab-info --vocab {params.vocab:q} --spm-src {input.spm_src:q} --spm-tgt {input.spm_tgt:q}"
        " --train-src {input.src:q} --train-tgt {input.tgt:q} --out {output:q} >> {log:q} 2>&1"


rule encode:
    input:
        src=LAYOUT.text("{dataset}", "{split}", "src"),
        tgt=LAYOUT.text("{dataset}", "{split}", "tgt"),
        spm_src=LAYOUT.spm("{dataset}", "src"),
        spm_tgt=LAYOUT.spm("{dataset}", "tgt"),
    output:
        LAYOUT.encoded("{dataset}", "{split}"),
    log:
        LAYOUT.log("encode", "{dataset}.{split}"),
    benchmark:
        LAYOUT.benchmark("encode", "{dataset}.{split}")
    conda:
        "../../envs/data.yaml"
    threads: 8
    resources:
        mem_mb=16000,
        runtime=240,
    shell:
        "python -m aiayn encode --src {input.src:q} --tgt {input.tgt:q} --spm-src {input.spm_src:q}"
        " --spm-tgt {input.spm_tgt:q} --threads {threads:q} --out {output:q} >> {log:q} 2>&1"
