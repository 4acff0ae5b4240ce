"""NumPy references: each function reads like the equation it implements (float64)."""
