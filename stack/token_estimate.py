"""The lane's one token estimate: characters of compact JSON divided by four.

Used wherever a count is needed before (or without) the model's tokenizer: the budget that trims
history, the size of a tool surface and of a promoted schema, and the prompt of a server that
reports no usage. One rule everywhere, so the numbers the README and the benchmarks print agree
with what the agent budgets with.
"""

from __future__ import annotations

import json
from typing import Any


def estimate_tokens(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False)) // 4
