"""One module per `floodgate` subcommand; see console/cli.py COMMAND_MODULES."""
