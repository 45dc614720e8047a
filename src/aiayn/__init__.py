"""aiayn: "Attention Is All You Need" (Vaswani et al. 2017) reproduced as one Snakemake pipeline."""

__version__ = "0.3.0"
