"""``python -m tests.support.circles``: fail when any two modules of ours import each other.

The layers contract (pyproject.toml) keeps folders from importing upwards; this keeps
the modules inside one folder from forming a circle, which import-linter does not
check. Every import counts, a function's or a TYPE_CHECKING one included.
"""

from __future__ import annotations

import sys

import grimp


def circles(*packages: str) -> list[list[str]]:
    """Each set of modules that import one another, directly or through others."""
    graph = grimp.build_graph(*packages)
    found: list[list[str]] = []
    seen: set[str] = set()
    for module in sorted(graph.modules):
        if module in seen:
            continue
        reach = graph.find_downstream_modules(module)  # what imports `module`
        circle = sorted(
            other
            for other in reach
            if module in graph.find_downstream_modules(other) or other == module
        )
        if circle:
            circle = sorted({module, *circle})
            seen.update(circle)
            found.append(circle)
    return found


def main() -> int:
    found = circles("verifier", "audit")
    for circle in found:
        print("import circle: " + " <-> ".join(circle), file=sys.stderr)
    print(f"import circles: {len(found)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
