"""The SQLite session store (schema in DESIGN.md, a public contract)."""

from .store import HELD, SearchHit, Store, StoreError, new_session_id, now_iso

__all__ = ["HELD", "SearchHit", "Store", "StoreError", "new_session_id", "now_iso"]
