"""The tests check and what only it uses: the head-state run, its results, the
test infrastructure from the base, the tampering scan, and the entries that run
inside the sandbox (`entries/`, scripts run by path that import nothing of ours).
"""
