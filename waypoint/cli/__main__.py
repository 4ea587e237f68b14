"""`python -m waypoint.cli` runs the command-line program."""

from waypoint.cli import main

main()
