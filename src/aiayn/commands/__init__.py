"""One module per `python -m aiayn <command>`: `add_arguments(parser)` and `run(args)`."""
