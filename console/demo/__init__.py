"""`floodgate demo`: a local cluster with load and scripted faults (runner) and the
summary of what the fuse made of them (summary)."""
