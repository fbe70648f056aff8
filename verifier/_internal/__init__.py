"""Plumbing: git, the repository, the head-state copy, safe paths, mirrors, cancel tokens,
the sandbox.

Everything in these modules is considered internal and unstable: the checks
(policy) call it; faces never do.
"""
