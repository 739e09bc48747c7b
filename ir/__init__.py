"""The typed SSA IR and its passes: core/ (values, ops, types, printer, parser, verifier),
torchapi/ (what the compiler knows of torch), shapes/ (the shape and dtype rules), kernel/ (the
kernel IR), passes/ (docs/architecture.md)."""
