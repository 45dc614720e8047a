"""The data stage (§5.1): archives in, encoded corpora out. `download` fetches and verifies the
WMT archives (or `generate` makes the offline demo's), `prepare` extracts, aligns and cleans their
text, `vocab` trains the sentencepiece vocabularies, `encode` turns aligned text into the token
ids of an encoded corpus, whose file format is `binary`; `mimic` writes corpora of the paper's
sizes with real text's statistics (benchmarks/rehearsal.py). Called by the rules of data.smk:
download, generate, prepare, prepare_eval (`prepare.prepare_eval`), vocab, vocab_info
(`vocab.write_info`) and encode; writes results/downloads/ and results/data/<dataset>/.
"""
