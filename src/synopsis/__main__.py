"""``python -m synopsis ...`` = the ``synopsis`` command (``accelerate launch -m synopsis train ...``)."""

import sys

from synopsis.cli import main

sys.exit(main())
