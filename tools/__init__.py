"""Maintenance scripts of the course (executing notebooks, building the website)."""
