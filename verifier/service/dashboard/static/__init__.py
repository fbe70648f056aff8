"""The dashboard's stylesheet and icon (package data)."""
