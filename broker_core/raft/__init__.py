"""Raft on the CommitLog (issue 62): a group of three that elects its leader and
appends through it, with no controller and no ZooKeeper. `node` is the algorithm,
pure; `log` what it keeps across a crash; `messages` what nodes say."""
