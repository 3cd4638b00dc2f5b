"""Transition only: the replica layer's errors live in :mod:`engine.errors` now.

engine/coordinator/cluster_link.py still imports NotLeaderOrFollowerError from here; delete
this module once it imports it from engine.errors."""

from __future__ import annotations

from ..errors import NotLeaderOrFollowerError

__all__ = ["NotLeaderOrFollowerError"]
