"""`make demo`: real sessions on a real repository, done versus delivered."""
