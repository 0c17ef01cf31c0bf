"""Stand-in for transformer_engine.common (recipes only)."""
