"""floodgate's broker and its clients, in rooms:

- `store/`: the storage (CommitLog, ConsumeQueue, flush, retention, recovery;
  one class per on-disk concept, offsets the only shared truth);
- `server/`: the broker process: request dispatch (`broker`), the write path
  and its admission (`write_path`), TCP (`tcp`) and HTTP (`http`), drill
  faults, topic and group state, the runner that ties them to one loop;
- `observe/`: what a broker says about itself: per-op latency by the second
  (`recorder`), one `BrokerSnapshot` per tick and its exporters (`/stats` as
  the typed `BrokerStats`, `/metrics`, the Parquet metrics log), loop lag;
- `client/`: producers (threaded and asyncio over one `SendPlan`), consumer,
  load generator, a producer's own HTTP endpoint, admin calls;
- `cluster/`: a local cluster launcher and the cluster file.

`protocol.py` (wire format, PROTOCOL.md) and `errors.py` are shared by all.
"""
