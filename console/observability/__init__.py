"""Prometheus and Grafana set-ups for a floodgate cluster.

`prometheus_config` writes prometheus.yml, `prometheus_rules` the recording
rules and SLA alerts, `grafana_dashboard` the dashboard JSON and
`grafana_push` sends it to a Grafana through grafana-client. Everything here
returns data or raises `ObservabilityError`; the CLI in
console/commands/{prometheus,grafana}_cmd.py decides what a person sees.
"""
