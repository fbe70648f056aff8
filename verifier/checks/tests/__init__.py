"""The tests check and what only it uses: the head-state run (`check`), the cache of
its results (`cache`), how each runner is run (`runners`) and what the sandbox hides
from it (`hidden`), reading and judging its results (`results`, `judge`), the test
infrastructure from the base (`testinfra`), the tampering scan (`tampering`, on
the files `changed` reads), and the entries that run inside the sandbox
(`entries/`, scripts run by path that import nothing of ours).
"""

# The check's name: its results are keyed by it, in the verdict and in the store.
NAME = "tests"
