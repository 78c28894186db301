"""The structure drawing of docs/architecture.md, made from the code as it is.

Reads every module of the top-level packages (and of broker_core's rooms) with `ast`,
collects the imports between them and draws them in layers: a part imports only parts
drawn below it. An import circle, or an arrow the dependency rules do not allow, is
printed under the drawing, so the page says so the day one appears.

    .venv/bin/python scripts/structure.py            # Markdown, as the docs show it
    .venv/bin/python scripts/structure.py --check    # exit 1 on a circle or a broken rule

The docs build (scripts/docs_hooks.py) puts the drawing where docs/architecture.md
says `<!-- structure -->`.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PACKAGES = (
    "console", "spark_reports", "broker_core", "kernel_tuning", "capacity", "fuse", "heatmap",
)
# The latency contract: pure constants and functions every package may import.
CONTRACT = ("heatmap.layout", "heatmap.sla")
# What each package may import (docs/architecture.md, "The parts"); the contract aside.
ALLOWED = {
    "console": set(PACKAGES) - {"console"},
    "spark_reports": {"heatmap", "capacity"},
    "broker_core": {"heatmap", "fuse", "kernel_tuning"},
    "kernel_tuning": set(),
    "capacity": set(),
    "fuse": set(),
    "heatmap": set(),
}
# broker_core's modules that every room shares (they import no room).
SHARED = ("protocol", "errors", "fsutil", "names", "deadline", "message_id", "flags",
          "log_format")


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path, package: tuple[str, ...]) -> list[str]:
    """The modules a file imports: absolute names, relative imports resolved, and
    `from a import b` read as `a.b` where b is a module of its own."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                base = ".".join([*package[: len(package) - (node.level - 1)],
                                 *([node.module] if node.module else [])])
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append(sub if _is_module(sub) else base)
    return out


def _modules(top: str):
    for path in sorted((ROOT / top).rglob("*.py")):
        rel = path.relative_to(ROOT)
        yield path, tuple(rel.parts[:-1])


def package_edges() -> tuple[Counter, Counter]:
    """(arrows between packages, arrows to the latency contract alone): (from, to) -> how
    many files import that way."""
    edges: Counter = Counter()
    contract: Counter = Counter()
    for top in PACKAGES:
        for path, package in _modules(top):
            plain: set[tuple[str, str]] = set()
            to_contract: set[tuple[str, str]] = set()
            for name in _imports(path, package):
                parts = name.split(".")
                if parts[0] not in PACKAGES or parts[0] == top:
                    continue
                if ".".join(parts[:2]) in CONTRACT:
                    to_contract.add((top, parts[0]))
                else:
                    plain.add((top, parts[0]))
            edges.update(plain)
            contract.update(to_contract - plain)
    return edges, contract


def room_edges() -> Counter:
    """Arrows between broker_core's rooms (sub-packages and shared modules): files."""
    edges: Counter = Counter()
    for path, package in _modules("broker_core"):
        rel = path.relative_to(ROOT / "broker_core").parts
        room = rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")
        if room == "__init__":
            continue
        seen = set()
        for name in _imports(path, package):
            parts = name.split(".")
            if parts[0] != "broker_core" or len(parts) < 2 or parts[1] in ("", room):
                continue
            target = parts[1]
            if (ROOT / "broker_core" / target).is_dir() or (
                    ROOT / "broker_core" / f"{target}.py").is_file():
                seen.add((room, target))
        edges.update(seen)
    return edges


def layers(nodes: list[str], edges) -> tuple[list[list[str]], list[list[str]]]:
    """Nodes by layer (0: imports nothing of the others) and any import circles."""
    out = {n: {b for (a, b) in edges if a == n and b in nodes} for n in nodes}
    level: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(n: str, stack: list[str]) -> int:
        if n in level:
            return level[n]
        if n in stack:
            circles.append(stack[stack.index(n):] + [n])
            return 0
        level[n] = max((visit(m, [*stack, n]) + 1 for m in out[n]), default=0)
        return level[n]

    for n in nodes:
        visit(n, [])
    rows = [sorted(n for n in nodes if level[n] == i) for i in range(max(level.values()) + 1)]
    return rows, circles


def _draw(rows: list[list[str]], edges, note=None) -> list[str]:
    width = max(len(n) for row in rows for n in row)
    lines = []
    for i, row in reversed(list(enumerate(rows))):
        for n in row:
            targets = sorted({b for (a, b) in edges if a == n})
            extra = note(n) if note else ""
            said = ", ".join(f"{b} ({edges[(n, b)]})" for b in targets) or extra or "(nothing)"
            lines.append(f"{n.ljust(width)}  ->  {said}")
        if i:
            lines.append(" " * width + "  |")
    return lines


def markdown() -> str:
    edges, contract = package_edges()
    rows, circles = layers(list(PACKAGES), edges)
    broken = sorted(f"`{a}` imports `{b}`" for (a, b) in edges if b not in ALLOWED[a])

    def contract_note(n: str) -> str:
        if (n, "heatmap") in contract and (n, "heatmap") not in edges:
            return f"heatmap.layout and .sla only, the latency contract ({contract[(n, 'heatmap')]})"
        return ""

    out = [
        "Each part imports only the parts drawn below it; the figures are how many of its "
        "files import the other. Drawn by `scripts/structure.py` from the code at build "
        "time.",
        "",
        "```text",
        *_draw(rows, edges, contract_note),
        "```",
        "",
    ]
    room = room_edges()
    room_nodes = sorted({a for a, _ in room} | {b for _, b in room})
    rrows, rcircles = layers(room_nodes, room)
    out += [
        "Inside `broker_core`, its rooms and shared modules (`" + "`, `".join(SHARED) + "`):",
        "",
        "```text",
        *_draw(rrows, room),
        "```",
        "",
    ]
    problems = [f"import circle: {' -> '.join(c)}" for c in circles + rcircles] + broken
    if problems:
        out += ["!!! warning \"Against the dependency rules\"", ""]
        out += [f"    - {p}" for p in problems]
    else:
        out.append("No import circle, and no arrow against the dependency rules.")
    return "\n".join(out) + "\n"


def problems() -> list[str]:
    edges, _ = package_edges()
    _, circles = layers(list(PACKAGES), edges)
    room = room_edges()
    _, rcircles = layers(sorted({a for a, _ in room} | {b for _, b in room}), room)
    return [" -> ".join(c) for c in circles + rcircles] + [
        f"{a} imports {b}" for (a, b) in edges if b not in ALLOWED[a]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 on an import circle or an arrow against the rules")
    args = ap.parse_args(argv)
    if args.check:
        found = problems()
        for p in found:
            print(p, file=sys.stderr)
        return 1 if found else 0
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
