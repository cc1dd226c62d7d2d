"""fallback-lane: a local, OpenAI-compatible agent endpoint for when the cloud model fails."""

__version__ = "0.1.0"
