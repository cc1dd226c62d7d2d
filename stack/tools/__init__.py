"""Tools: the registry, the core tools (one module per family), validation and execution."""
