"""The log format of every floodgate process: broker_core.log_format's, which a broker
started without the console (`python -m broker_core`) uses too."""

from broker_core.log_format import FORMAT, configure_logging  # noqa: F401 - re-exported
