"""aiayn: "Attention Is All You Need" (Vaswani et al. 2017) reproduced as one Snakemake pipeline.

A folder per stage of the pipeline, in the Snakefile's order: `study` (config.yaml made into a
plan), `data`, `parsing`, `check`, `training`, `evaluation`, `report`; below them `model` (the
Transformer) and `runtime` (what the stages run on). `cli` is `python -m aiayn <command>` (run by
`__main__`), one module of `commands` per command; `errors` and `io` are what every stage shares
(the one class of errors a user can fix, the one boundary that explains them, atomic writes);
`inventory` binds every input of the package to its one check. docs/development.md maps them too;
tests/test_maps.py holds both maps to the files.
"""

from __future__ import annotations

__version__ = "0.5.0"


def described() -> str:
    """`__version__`, and where this package runs from a git checkout of aiayn, its commit:
    "0.5.0 (git 1a2b3c4d5e6f)", "-dirty" added when tracked files differ from it. The version alone
    says little between two releases; the commit says which code wrote a table or a checkpoint."""
    global _DESCRIBED
    if _DESCRIBED is None:
        _DESCRIBED = __version__ + _git_suffix()
    return _DESCRIBED


_DESCRIBED: str | None = None


def _git_suffix() -> str:
    import subprocess
    from pathlib import Path

    here = Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            run = subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        return run.stdout.strip() if run.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() / "src" / "aiayn" != here:  # another project's checkout around it
        return ""
    commit = git("rev-parse", "--short=12", "HEAD")
    if not commit:
        return ""
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f" (git {commit}{'-dirty' if dirty else ''})"
