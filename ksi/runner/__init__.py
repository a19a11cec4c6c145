"""The attempt lifecycle: seeding, running, capture, grading, journal, resume."""
