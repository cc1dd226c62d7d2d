"""Tool search: the catalog of deferred tools, retrieval, the bridge tools, and the tool surface of a model call."""
