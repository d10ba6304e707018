"""python -m autotune: the command line."""

from autotune.cli import main

main()
