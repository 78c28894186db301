"""The broker process: request dispatch over the store, the write path and its
admission (busy answers, drill faults, flush waits), the TCP and HTTP servers,
topic and consumer-group state, and the runner that ties them to one event loop."""
