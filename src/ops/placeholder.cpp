// Removed once ops has sources.
