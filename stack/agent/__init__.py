"""The agent: system prompt, llm client, tool-call recovery, and the loop that ties them."""
