"""``python -m synopsis``: the ``synopsis`` command, for launchers that start modules
(``accelerate launch --num_processes 8 -m synopsis summarize ...``)."""

import sys

from synopsis.cli import main

if __name__ == "__main__":
    sys.exit(main())
