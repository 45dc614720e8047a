"""Print a pip constraints file that pins every dependency of pyproject.toml (and of the extras
named on the command line) to the floor of its range: `name>=X` becomes `name==X`. CI installs the
project with it to test that the floors it declares work (.ci/run)."""

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
requirements = list(project["dependencies"])
for extra in sys.argv[1:]:
    requirements += project["optional-dependencies"][extra]
for requirement in requirements:
    name = re.match(r"[A-Za-z0-9_.\-]+", requirement)[0]
    floor = re.search(r">=\s*([^,;\s]+)", requirement)
    pin = re.search(r"==\s*([^,;\s]+)", requirement)
    if floor or pin:
        print(f"{name}=={(floor or pin)[1]}")
    else:
        sys.exit(f"pyproject.toml: {requirement!r} has no floor (>=) or pin (==) to test")
