// Removed once io has sources.
