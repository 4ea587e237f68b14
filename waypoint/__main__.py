"""`python -m waypoint` runs the command-line program."""

from waypoint.cli import main

main()
