"""``python -m synopsis`` and the ``synopsis`` console script, for launchers that start modules too
(``accelerate launch --num_processes 8 -m synopsis summarize ...``)."""

import sys


def run() -> int:
    """The ``synopsis`` command; Ctrl-C while its modules load (a second or more: torch, transformers) is
    one line and exit status 130 too, not a traceback of the import."""
    try:
        from synopsis.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (Ctrl-C)\n")
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
