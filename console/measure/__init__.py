"""`floodgate capacity measure`: the capacity grid measured on real brokers (the pure
ramp, knee and published table live in capacity.ramp and capacity.metaq2)."""
