"""Placeholder: written in issue x."""

from ui.lesson import coming_soon

coming_soon("whatif")
