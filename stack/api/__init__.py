"""The shim: an OpenAI-compatible HTTP front for the agent loop (see DESIGN.md, "HTTP API")."""
