"""CLI verbs, one module each; loaded lazily by cosim.cli so that ``cosim --help`` stays fast."""
