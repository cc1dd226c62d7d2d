"""The SQLite session store (schema in DESIGN.md, a public contract)."""

from .store import SearchHit, Store, StoreError, new_session_id, now_iso

__all__ = ["SearchHit", "Store", "StoreError", "new_session_id", "now_iso"]
