"""Formats are pure: a result in, text out, no I/O (the verdict, a session, the gate's
decision, a report check), so one result renders the same everywhere."""
