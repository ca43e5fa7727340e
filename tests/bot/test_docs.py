"""The documentation checked against the code.

Why: docs that drift from the code send a newcomer to keys, commands and modules that no
longer exist. These tests read the sources of truth (config.example.toml, the argparse
parser, the /help text, the source tree) and fail when the README or docs/ disagree.

Conventions they enforce:
- docs/configuration.md has one `## [section]` heading per config section, each with a
  table `| key | default | meaning |` holding one row per key: the key in backticks, the
  default as the TOML value of config.example.toml in backticks, or `unset` for a key
  that is only a commented example there.
- docs/commands.md names every chat command's usage form and every `chatterd ...`
  command line (in backticks) and option.
- Relative links, source paths (`core/...py`, `channels/telegram/`) and dotted names
  (`core.text.tokens`) in the README and docs/ exist; Python blocks import what exists.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.cli.main import build_parser
from bot.commands.admin import BotCommand
from bot.commands.table import Commands
from core.admins import Admins
from core.messages import ChatType, InboundMessage
from core.turn.access import AccessRules
from memory.chats.settings_cache import CachedChatSettings
from memory.turns.store import SqlStorage

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIG_EXAMPLE = ROOT / "config.example.toml"
CONFIG_DOC = DOCS / "configuration.md"
COMMANDS_DOC = DOCS / "commands.md"
README_MAX_BYTES = 15_000
KEY_TABLE_HEADER = ("key", "default", "meaning")
UNSET = "unset"
SOURCE_ROOTS = ("bot", "channels", "core", "memory", "tests", "bench")
PACKAGES = ("bot", "channels", "core", "memory")

_SECTION_LINE = re.compile(r"^\[([a-z_]+)\]\s*(?:#.*)?$")
_KEY_LINE = re.compile(r"^([a-z_][a-z0-9_]*)\s*=\s*(.*)$")
_COMMENTED_KEY_LINE = re.compile(r"^#\s*([a-z_][a-z0-9_]*)\s*=")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_SOURCE_PATH = re.compile(rf"^((?:{'|'.join(SOURCE_ROOTS)})/[\w./-]*)(?:::(\w+))?(?:\s.*)?$")
_DOTTED = re.compile(rf"^(?!.*\.(?:py|md|toml|json)$)((?:{'|'.join(PACKAGES)})(?:\.\w+)+)$")


@dataclass(frozen=True)
class ExampleKey:
    section: str
    key: str
    value: object | None  # None: only a commented example in config.example.toml


def doc_pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def example_keys(text: str) -> list[ExampleKey]:
    """Every `key = value` and `# key = ...` line inside a section of the example file."""
    found: dict[tuple[str, str], ExampleKey] = {}
    section: str | None = None
    for line in text.splitlines():
        if match := _SECTION_LINE.match(line):
            section = match.group(1)
            continue
        if section is None:
            continue
        if match := _KEY_LINE.match(line):
            value = tomllib.loads(f"v = {match.group(2)}")["v"]
            found[(section, match.group(1))] = ExampleKey(section, match.group(1), value)
        elif match := _COMMENTED_KEY_LINE.match(line):
            found.setdefault((section, match.group(1)), ExampleKey(section, match.group(1), None))
    return list(found.values())


def prose_lines(text: str) -> Iterator[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def level2_sections(text: str) -> dict[str, str]:
    """`## heading` -> the text under it, up to the next `## ` heading."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in prose_lines(text):
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return {title: "\n".join(lines) for title, lines in sections.items()}


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def key_table(section_text: str) -> dict[str, list[str]]:
    """Rows of every `| key | default | meaning |` table: key name -> its cells."""
    rows: dict[str, list[str]] = {}
    in_table = False
    for line in section_text.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = _cells(line)
        if tuple(c.lower() for c in cells) == KEY_TABLE_HEADER:
            in_table = True
            continue
        if not in_table or set("".join(cells)) <= set("-: "):
            continue
        assert len(cells) == 3, f"row with {len(cells)} cells (escape | as \\|): {line}"
        key = re.fullmatch(r"`([a-z_][a-z0-9_]*)`", cells[0])
        assert key, f"first cell is not a `key`: {line}"
        assert key.group(1) not in rows, f"{key.group(1)} has two rows"
        rows[key.group(1)] = cells
    return rows


def documented_keys() -> dict[str, dict[str, list[str]]]:
    """docs/configuration.md: section -> key -> cells, from the `## [section]` parts."""
    out: dict[str, dict[str, list[str]]] = {}
    for title, body in level2_sections(CONFIG_DOC.read_text(encoding="utf-8")).items():
        if match := re.fullmatch(r"\[([a-z_]+)\]", title):
            out[match.group(1)] = key_table(body)
    return out


# -- (a) every config key is documented ---------------------------------------------------


def test_every_example_key_has_a_row_under_its_section() -> None:
    keys = example_keys(CONFIG_EXAMPLE.read_text(encoding="utf-8"))
    assert len(keys) > 40, "config.example.toml was not parsed"
    documented = documented_keys()
    missing = [f"[{k.section}] {k.key}" for k in keys if k.key not in documented.get(k.section, {})]
    assert not missing, f"keys without a row in docs/configuration.md: {missing}"


def test_documented_defaults_are_the_example_values() -> None:
    documented = documented_keys()
    wrong = []
    for item in example_keys(CONFIG_EXAMPLE.read_text(encoding="utf-8")):
        cells = documented.get(item.section, {}).get(item.key)
        if cells is None:
            continue  # reported by the test above
        shown = cells[1]
        if item.value is None:
            if shown != UNSET:
                wrong.append(f"[{item.section}] {item.key}: {shown!r}, expected {UNSET!r}")
            continue
        literal = re.fullmatch(r"`([^`]+)`", shown)
        try:
            value = tomllib.loads(f"v = {literal.group(1)}")["v"] if literal else None
        except tomllib.TOMLDecodeError:
            value = None
        if literal is None or value != item.value:
            wrong.append(f"[{item.section}] {item.key}: {shown!r}, expected `{item.value!r}`")
    assert not wrong, "defaults in docs/configuration.md differ from config.example.toml:\n" + (
        "\n".join(wrong)
    )


def test_no_documented_key_or_section_is_unknown() -> None:
    keys = example_keys(CONFIG_EXAMPLE.read_text(encoding="utf-8"))
    known = {(k.section, k.key) for k in keys}
    sections = {k.section for k in keys}
    documented = documented_keys()
    assert set(documented) == sections, "## [section] headings differ from config.example.toml"
    stale = [
        f"[{s}] {key}" for s, rows in documented.items() for key in rows if (s, key) not in known
    ]
    assert not stale, f"documented keys that config.example.toml does not have: {stale}"


# -- (b) links ------------------------------------------------------------------------------


def github_slugs(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text."""
    slugs: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(markdown):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        count = seen.get(base, 0)
        seen[base] = count + 1
        slugs.add(base if count == 0 else f"{base}-{count}")
    return slugs


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: p.name)
def test_relative_links_point_to_existing_files_and_headings(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for line in prose_lines(text):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            if not dest.exists():
                broken.append(f"{target}: no such file")
            elif anchor and dest.suffix == ".md":
                if anchor not in github_slugs(dest.read_text(encoding="utf-8")):
                    broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{page.name}: {broken}"


# -- (c) the README stays a front door --------------------------------------------------------


def test_readme_is_at_most_15_kb() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move reference to docs/"


def test_readme_links_every_docs_page() -> None:
    text = README.read_text(encoding="utf-8")
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if f"(docs/{p.name}" not in text]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


# -- (d) every command is documented ------------------------------------------------------------


def _usage(argv: list[str]) -> str:
    """The usage block `chatterd ARGV --help` prints (up to its first blank line)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    return out.getvalue().split("\n\n", 1)[0]


def cli_commands(prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every command path of the `chatterd` parser with its usage, found through --help."""
    usage = _usage(list(prefix))
    choices = re.search(r"\{([\w,-]+)\}", usage)
    if choices is None:
        yield prefix, usage
        return
    if prefix:
        yield prefix, usage
    for name in choices.group(1).split(","):
        yield from cli_commands((*prefix, name))


def test_every_cli_command_and_option_is_in_commands_doc() -> None:
    doc = COMMANDS_DOC.read_text(encoding="utf-8")
    commands = dict(cli_commands())
    leaves = [path for path in commands if not re.search(r"\{", commands[path])]
    assert ("run",) in leaves and ("memory", "export") in leaves, "parser walk found nothing"
    missing = [" ".join(p) for p in leaves if f"`chatterd {' '.join(p)}" not in doc]
    options = {
        option
        for usage in [_usage([]), *commands.values()]
        for option in re.findall(r"(--[a-z][a-z-]*)", usage)
        if option != "--help"
    }
    assert {"--config", "--user"} <= options
    missing += sorted(o for o in options if o not in doc)
    assert not missing, f"not in docs/commands.md: {missing}"


def _commands(storage: SqlStorage, admins: frozenset[str]) -> Commands:
    """Commands as the daemon builds them, `/bot` included."""
    control = BotCommand(
        CachedChatSettings(storage.chat_settings),
        AccessRules(admins=Admins(admins)),
        ("chatterd",),
        20,
    )
    return Commands(
        store=storage,
        admins=Admins(admins),
        bot_name="chatterd",
        context_report=lambda platform, chat_id: None,
        bot_control=control,
    )


async def _help_text(storage: SqlStorage, *, admin: bool) -> str:
    commands = _commands(storage, frozenset({"console:op"}))
    who = "op" if admin else "guest"
    message = InboundMessage(
        platform="console",
        chat_id=who,
        chat_type=ChatType.PRIVATE,
        sender_id=who,
        sender_name=who,
        text="/help",
    )
    return (await commands.handle(message)).text


def chat_command_forms(help_text: str) -> set[str]:
    """Usage forms in /help: `/memory add <text>` lines, and admin `/memory show|add` lists."""
    forms: set[str] = set()
    for line in help_text.splitlines():
        usage, dash, _ = line.partition(" — ")
        if dash and usage.startswith("/"):
            forms.add(usage.strip())
    for command, alternatives in re.findall(r"(/\w+) ([a-z]+(?:\|[a-z]+)+)", help_text):
        forms.update(f"{command} {alt}" for alt in alternatives.split("|"))
    forms.update(re.findall(r"/\w+ [a-z_]+:[a-z_]+", help_text))
    forms.update(re.findall(r"/\w+", help_text))
    return forms


async def test_every_chat_command_in_help_is_in_commands_doc(storage: SqlStorage) -> None:
    doc = COMMANDS_DOC.read_text(encoding="utf-8")
    user_help = await _help_text(storage, admin=False)
    admin_help = await _help_text(storage, admin=True)
    assert len(admin_help) > len(user_help), "/help shows admins nothing more"
    forms = chat_command_forms(admin_help)
    assert {"/memory add <text>", "/memory show", "/context platform:chat_id"} <= forms
    names = _commands(storage, frozenset()).names
    assert "bot" in names
    forms.update(f"/{name}" for name in names)
    missing = sorted(form for form in forms if form not in doc)
    assert not missing, f"chat commands not in docs/commands.md: {missing}"


# -- source paths, dotted names and code examples exist ----------------------------------------


def inline_code(page: Path) -> Iterator[str]:
    for line in prose_lines(page.read_text(encoding="utf-8")):
        yield from _INLINE_CODE.findall(line)


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: p.name)
def test_source_paths_and_module_names_exist(page: Path) -> None:
    gone = []
    for code in inline_code(page):
        if match := _SOURCE_PATH.match(code):
            path = ROOT / match.group(1)
            if not path.exists():
                gone.append(match.group(1))
            elif match.group(2) and f"def {match.group(2)}(" not in path.read_text("utf-8"):
                gone.append(code)
        elif match := _DOTTED.match(code):
            if not _resolves(match.group(1)):
                gone.append(code)
    assert not gone, f"{page.name} names paths or modules that do not exist: {gone}"


def _resolves(dotted: str) -> bool:
    """`core.text.tokens` or `memory.turns.types.Turn`: a module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(target, attr):
                return False
            target = getattr(target, attr)
        return True
    return False


def python_blocks(page: Path) -> Iterator[str]:
    block: list[str] | None = None
    for line in page.read_text(encoding="utf-8").splitlines():
        if block is None and re.match(r"^\s*```python\s*$", line):
            block = []
        elif block is not None and _FENCE.match(line):
            yield "\n".join(block)
            block = None
        elif block is not None:
            block.append(line)


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: p.name)
def test_python_examples_parse_and_import_what_exists(page: Path) -> None:
    missing = []
    for block in python_blocks(page):
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = importlib.import_module(node.module)
                missing += [
                    f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)
                ]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)
    assert not missing, f"{page.name} imports names that do not exist: {missing}"


def test_newcomer_finds_the_photo_path_by_folder_names() -> None:
    """The issue's test: Telegram photo -> vision -> `(Image 1: ...)` note, by folders."""
    text = (DOCS / "context-engine.md").read_text(encoding="utf-8")
    images = level2_sections(text)["Images"]
    steps = [
        "channels/telegram/inbound.py",
        "channels/telegram/files.py",
        "core/media/vision.py",
        "core/inject.py",
        "(Image 1:",
    ]
    at = 0
    for step in steps:
        found = images.find(step, at)
        assert found >= 0, f"docs/context-engine.md, ## Images: {step!r} missing after {at}"
        at = found + len(step)
