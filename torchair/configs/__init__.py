"""torchair configuration (CompilerConfig)."""
