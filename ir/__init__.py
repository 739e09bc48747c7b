"""The typed SSA IR: types, ops with regions and source locations, printer, verifier."""
