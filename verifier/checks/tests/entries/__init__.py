"""Scripts copied into each run and executed inside the sandbox by path.

They are never imported by the verifier and import nothing of ours: the
repository under test must not be able to reach the verifier through them.
"""
