"""Lesson: position (placeholder until its lesson lands; see docs/PAGES.md)."""

from ui.lesson import coming_soon

coming_soon("position")
