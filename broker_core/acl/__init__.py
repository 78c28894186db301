"""Access control on the data port, in the spirit of RocketMQ's ACL 2.0: users with a
secret (kept as SCRAM-SHA-256 keys: `users`), rules of user x resource x action x
allow/deny x source network (`rules`), the broker's table of both (`table`), and the
per-connection handshake that proves a user without sending the secret (`handshake`)."""
