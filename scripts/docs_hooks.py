"""MkDocs hooks (mkdocs.yml `hooks:`): the docs pages that are never written twice.

- `reference/commands.md` is made at build time from the argparse parsers
  (`console.cli.build_parser()` and every subparser under it): each command's usage,
  description, options and epilog, so the reference says what `--help` says.
- `reference/protocol.md` is `broker_core/PROTOCOL.md` and `benchmarks.md` is
  `bench/README.md`, included as they are where they live (the protocol beside its
  code, the figures where bench/ writes them).
- `architecture.md`'s `<!-- structure -->` becomes the drawing of the parts and their
  imports that `scripts/structure.py` makes from the code.
- The first time a page names one of the source talks by the short name the code uses
  ("the Double-11 talk", ...), the name links to references.md, which lists them.

`mkdocs serve` watches the included files and the code the pages are made from.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `console` when mkdocs runs outside the venv's install
    sys.path.insert(0, str(ROOT))

# docs page -> the file it is, relative to the repository
INCLUDED = {
    "reference/protocol.md": "broker_core/PROTOCOL.md",
    "benchmarks.md": "bench/README.md",
}
COMMANDS_PAGE = "reference/commands.md"
STRUCTURE_MARK = "<!-- structure -->"
USAGE_WIDTH = "88"  # columns argparse wraps usage lines at, whatever the terminal


def on_files(files, config):
    files.append(File.generated(config, COMMANDS_PAGE, content=commands_markdown()))
    for uri, source in INCLUDED.items():
        files.append(File.generated(config, uri, content=_included(uri, source)))
    return files


def on_page_markdown(markdown, page, config, files):
    if STRUCTURE_MARK in markdown:
        markdown = markdown.replace(STRUCTURE_MARK, _structure().markdown())
    if page.file.src_uri != REFERENCES_PAGE:
        depth = page.file.src_uri.count("/")
        markdown = _link_talks(markdown, "../" * depth + REFERENCES_PAGE)
    return markdown


def on_serve(server, config, builder):
    for source in INCLUDED.values():
        server.watch(str(ROOT / source))
    for watched in ("console/commands", "console/cli.py", "scripts/structure.py"):
        server.watch(str(ROOT / watched))
    return server


# ---------------------------------------------------------------- the talks

REFERENCES_PAGE = "references.md"
TALKS = ("the Double-11 talk", "the Taobao talk", "the RocketMQ design talk",
         "the RocketMQ read-write article", "the Mogujie talk")


def _link_talks(markdown: str, target: str) -> str:
    """Link each talk's first mention in prose (not in code, a heading or a link)."""
    todo = {t.lower(): t for t in TALKS}
    lines = markdown.split("\n")
    fence = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if fence or not todo or line.startswith(("    ", "\t", "#")):
            continue
        for key in list(todo):
            at = line.lower().find(key)
            if at < 0 or line[:at].count("`") % 2 or line[:at].endswith("["):
                continue
            name = line[at:at + len(key)]
            line = f"{line[:at]}[{name}]({target}){line[at + len(key):]}"
            del todo[key]
        lines[i] = line
    return "\n".join(lines)


# ---------------------------------------------------------------- included files


def _included(uri: str, source: str) -> str:
    """The file's text, with a line under its title saying where it is kept."""
    text = (ROOT / source).read_text(encoding="utf-8")
    note = (f"*This page is `{source}` in the repository, included when the docs are "
            "built: edit it there.*\n")
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith("# "):
        return lines[0] + "\n" + note + "".join(lines[1:])
    return note + "\n" + text


def _structure():
    spec = importlib.util.spec_from_file_location("floodgate_structure",
                                                  ROOT / "scripts" / "structure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- the command reference

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_SPECIAL = re.compile(r"([\\*_\[\]#])")


def _escape(s: str) -> str:
    return _SPECIAL.sub(r"\\\1", s).replace("<", "&lt;")


def _text(s: str | None) -> str:
    """Help text as Markdown: argparse's whitespace collapsed, Markdown's characters
    escaped outside `code spans` (a help's `batch-*` must not start emphasis)."""
    if not s:
        return ""
    s = " ".join(s.split())
    out, last = [], 0
    for m in _CODE_SPAN.finditer(s):
        out.append(_escape(s[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_escape(s[last:]))
    return "".join(out)


def _code(s: str) -> str:
    """A code span that holds any backticks in s."""
    fence = "``" if "`" in s else "`"
    pad = " " if "`" in s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _anchor(path: list[str]) -> str:
    return "-".join(path[1:]) or "floodgate"


def _children(parser: argparse.ArgumentParser):
    """(name, aliases, short help, parser) of each subcommand, in --help's order."""
    for action in parser._actions:  # argparse has no public walk (see console/cli.py)
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help for a in action._choices_actions}
        by_parser: dict[int, list[str]] = {}
        for name, child in action.choices.items():
            by_parser.setdefault(id(child), []).append(name)
        for names in by_parser.values():
            child = action.choices[names[0]]
            yield names[0], names[1:], helps.get(names[0]), child


def _option(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    if action.option_strings:
        if action.nargs == 0:
            spec = ", ".join(action.option_strings)
        else:
            metavar = formatter._format_args(action, formatter._get_default_metavar_for_optional(
                action))
            spec = ", ".join(f"{o} {metavar}" for o in action.option_strings)
    else:
        spec = formatter._format_args(action, formatter._get_default_metavar_for_positional(
            action))
    help_text = formatter._expand_help(action) if action.help else ""
    line = f"- {_code(spec)}"
    return line + (f": {_text(help_text)}" if help_text else "")


def _section(parser: argparse.ArgumentParser, path: list[str], short: str | None,
             aliases: list[str]) -> list[str]:
    depth = min(len(path) + 0, 6)  # floodgate: ##, floodgate tune: ###, ...
    title = " ".join(path)
    out = [f"{'#' * max(depth, 2)} {title} {{#{_anchor(path)}}}", ""]
    if aliases:
        out += [f"Also: {', '.join(_code(' '.join([*path[:-1], a])) for a in aliases)}.", ""]
    formatter = parser._get_formatter()
    usage = formatter._format_usage(parser.usage, parser._actions,
                                    parser._mutually_exclusive_groups, prefix="").strip()
    out += ["```text", usage, "```", ""]
    description = parser.description or short
    if description:
        out += [_text(description), ""]
    if short and parser.description and " ".join(short.split()) != " ".join(
            parser.description.split()):
        out += [f"In the list: {_text(short)}.", ""]
    subcommands = list(_children(parser))
    if subcommands:
        out.append("Subcommands:")
        out.append("")
        for name, _aliases, help_text, _child in subcommands:
            ref = _anchor([*path, name])
            out.append(f"- [{_code(name)}](#{ref})" + (f": {_text(help_text)}" if help_text
                                                        else ""))
        out.append("")
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help is not argparse.SUPPRESS
                   and not isinstance(a, argparse._SubParsersAction)]
        if not actions:
            continue
        title = group.title or "options"
        out += [f"{title[0].upper()}{title[1:]}:", ""]
        if group.description:
            out += [_text(group.description), ""]
        out += [_option(a, formatter) for a in actions]
        out.append("")
    if parser.epilog:
        out += [_text(parser.epilog), ""]
    for name, child_aliases, help_text, child in subcommands:
        out += _section(child, [*path, name], help_text, child_aliases)
    return out


def commands_markdown() -> str:
    """The whole command reference, made from the parsers as `floodgate --help` is."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = USAGE_WIDTH  # argparse reads the width from the environment
    try:
        from console.cli import build_parser

        parser = build_parser()
        lines = [
            "# Command reference",
            "",
            "*Made from the command's own parsers when the docs are built "
            "(`scripts/docs_hooks.py`): what `floodgate COMMAND --help` prints, "
            "as one page.*",
            "",
            "Every subcommand has `--help`; data commands take `--json`; exit codes are "
            "0 ok, 1 failed (one line on stderr), 2 bad usage. The global options "
            "(`--tls-ca`, `--credentials`, `--debug`) go before the subcommand or after it.",
            "",
        ]
        lines += _section(parser, ["floodgate"], None, [])
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":  # print the page: .venv/bin/python scripts/docs_hooks.py
    sys.stdout.write(commands_markdown())
