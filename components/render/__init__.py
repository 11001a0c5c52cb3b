"""Pure rendering: typed specs in, text or dicts out. Nothing here imports pulumi."""
