"""The kernel IR: kernel ops, the primitives and element operations a kernel may hold, row plans,
and kernel names; what the passes build and the emitters print."""
