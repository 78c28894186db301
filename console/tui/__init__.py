"""The Textual TUI: the app, its screens, widgets and the panels (Rich renderables
that `floodgate status` prints too). It reads ClusterState from console.data and
never polls or parses a /stats document itself."""
