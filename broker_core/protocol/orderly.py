"""Ordered consumption: the lease a broker grants on a queue lock (LOCK_BATCH).

RocketMQ's is 60 s; shorter here so a crashed consumer's queue is free sooner
(its client trusts a lock for half of it: client.orderly)."""

LOCK_LEASE_S = 20.0
