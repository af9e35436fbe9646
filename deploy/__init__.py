"""deploy/: Decoder Lab behind nginx with Redis (see deploy/README.md)."""
