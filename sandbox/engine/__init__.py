"""State transitions of the emulator's resources (pure functions of ``EnvState`` + clock time)."""
