"""The dashboard's Jinja2 templates (package data)."""
