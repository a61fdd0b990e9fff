"""litrepro."""
