"""The parsing branch (§6.3): the Penn Treebank in, sequences out, and parses scored back as
trees. `prepare_treebank` writes one WSJ split as sentences, linearized trees and gold trees (the
prepare_treebank rule of parsing.smk, into results/data/<dataset>/), `trees` reads, preprocesses,
linearizes and repairs trees, `evalb` is EVALB with COLLINS.prm (the score rule's parsing half,
and `python -m aiayn evalb`). Training and decoding are the translation stages' own.
"""
