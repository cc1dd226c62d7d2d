"""The llm service: an OpenAI-compatible llama.cpp server with a hard generation cap and
cancellation when the client goes away. Stands alone: imports nothing else from `stack`."""
