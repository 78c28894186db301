"""What a broker says about itself: per-operation latency recorded second by
second, one `BrokerSnapshot` taken per tick, and its three exporters (`/stats`
JSON, `/metrics` for Prometheus, the Parquet metrics log), which read the
snapshot and nothing private."""
