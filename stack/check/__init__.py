"""The six-step check: drive chained prompts through the shim, then judge every step from the
session store alone, never from what the model says.

Stand-alone by design (DESIGN.md): it talks HTTP to the shim and reads the SQLite store read-only,
so it checks the lane a person actually runs rather than the code it was built from.
"""
