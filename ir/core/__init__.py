"""The IR core: values, ops with regions and source locations, types, the printer, the parser,
the verifier and the worklist rewriter."""
