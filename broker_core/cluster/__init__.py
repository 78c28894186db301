"""Local clusters: the launcher that runs N broker processes on loopback and the
cluster file (`cluster.toml`) that names them for every other command."""
