"""The console's data layer: sources (live /stats, Prometheus, recorded replays),
the poller that drives them, and ClusterState with its alerts, built purely from
what the sources answered. No Textual here: `floodgate status` uses it headless."""
