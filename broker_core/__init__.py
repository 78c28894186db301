"""floodgate's broker: storage (broker_core.store), and later the TCP server and clients."""
