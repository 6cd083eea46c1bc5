"""``python -m cosim`` is the ``cosim`` command."""

from cosim.cli import main

main()
