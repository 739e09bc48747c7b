"""What the compiler knows of torch's API: signatures, schemas, operators, Python-level
functions and the calls that need special handling."""
