"""High availability: broker groups of one master and N slaves (the Double-11 talk's 2M2S,
the Taobao talk's 主备同步双写 and 主备自动切换), in rooms:

- `epochs`: which master wrote which stretch of the log; what two replicas agree on;
- `wire`: the replication link's frames (PROTOCOL.md, "Replication link");
- `master`, `slave`: the two ends of the link; sync sends parked until the
  in-sync slaves ack;
- `node`: one broker's role and epoch, and which end of the link it runs;
- `records`, `membership`, `controller`, `routes`: the group records in
  ZooKeeper, a broker's registration and role from them, the controller that
  fails masters over, and the clients' view of who is master.

The store's side (bytes written at the master's offsets, truncation) is
`broker_core.store.replica`.
"""
