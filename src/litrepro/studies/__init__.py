"""Study declarations that sit beside the methods (each module says what it runs and what it writes)."""
