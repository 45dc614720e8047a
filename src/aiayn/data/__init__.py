"""The data stage (§5.1): archives in, encoded corpora out. `download` fetches and verifies the
WMT archives (or `demo` generates the offline demo's), `corpus` extracts, aligns and cleans their
text, `vocab` trains the sentencepiece vocabularies, `encode` turns aligned text into the token
ids of an encoded corpus, whose file format is `binary`. Called by the rules of data.smk:
download, generate_archive, prepare_train, prepare_eval, train_vocab, vocab_info, encode; writes
results/downloads/ and results/data/<dataset>/.
"""
