"""README.md and docs/*.md against the code: what users read must be what runs.

- every `tlsprobe [SUBCOMMAND] ... --option` the documents show (a command line in a code
  block, or in backticks) names options that subcommand has;
- the Markdown itself renders as written: code fences come in pairs (one left open turns
  the rest of the page inside out: prose in code blocks, examples as prose) and every table
  starts with its header and separator row, each row with the header's cells (a paragraph
  inside a table ends it: the rows after it render as text).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tlsprobe.cli import SUBCOMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
IDS = [str(path.relative_to(ROOT)) for path in DOCUMENTS]

#: `tlsprobe` as a command: at a line's start, after `$ `, `sudo `, a backtick, a pipe or "("
COMMAND = re.compile(r"(?:^|[`$(|]\s*|sudo\s+)tlsprobe((?:[ \t]+[^`|#\n]*)?)", re.MULTILINE)


def _options(command: str) -> set[str]:
    return set(build_parser(command)._option_string_actions)


def documented_options(text: str) -> list[tuple[int, str, str]]:
    """(line, subcommand, option) for each option of a tlsprobe command line in `text`."""
    found = []
    for match in COMMAND.finditer(text):
        words = match[1].split()
        command = words[0] if words and words[0] in SUBCOMMANDS else "probe"
        line = text.count("\n", 0, match.start()) + 1
        for word in words:
            if word.startswith("-") and not re.match(r"^-[\d.]", word):
                option = word.split("=", 1)[0].rstrip(".,;:)'\"")
                if option not in ("-", "--"):
                    found.append((line, command, option))
    return found


@pytest.mark.parametrize("path", DOCUMENTS, ids=IDS)
def test_every_option_of_a_documented_command_exists(path: Path) -> None:
    options = {command: _options(command) for command in SUBCOMMANDS}
    wrong = [f"{path.name}:{line}: tlsprobe {command}: {option}"
             for line, command, option in documented_options(path.read_text())
             if option not in options[command]]
    assert wrong == [], "options the documents show that the command does not have:\n" + \
        "\n".join(wrong)


def test_the_option_reader_finds_what_it_looks_for() -> None:
    text = ("```\n$ tlsprobe scan HOST --checks groups --jsn\n```\n"
            "and `tlsprobe pcap -i lo --stats` or `sudo tlsprobe HOST --msg`\n")
    assert documented_options(text) == [(2, "scan", "--checks"), (2, "scan", "--jsn"),
                                         (4, "pcap", "-i"), (4, "pcap", "--stats"),
                                         (4, "probe", "--msg")]
    assert "--jsn" not in _options("scan") and "--stats" in _options("pcap")


def markdown_problems(text: str) -> list[str]:
    """Unpaired code fences, and tables without a header and separator or with a row of
    another width."""
    problems: list[str] = []
    lines = text.split("\n")
    fence: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fence = None if fence is not None else i + 1
        elif fence is None and line.startswith("|"):
            end = i
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            problems += _table_problems(lines[i:end], i + 1)
            i = end
            continue
        i += 1
    if fence is not None:
        problems.append(f"line {fence}: a code fence that is never closed")
    return problems


def _cells(row: str) -> int:
    return re.sub(r"`[^`]*`", "", row.replace("\\|", "")).count("|")


def _table_problems(rows: list[str], first: int) -> list[str]:
    if len(rows) < 2 or not re.match(r"^\|\s*:?-{3,}", rows[1]):
        return [(f"line {first}: a table row without a header and separator row above it "
                 f"(a paragraph or blank line cut the table?): {rows[0][:60]}")]
    width = _cells(rows[0])
    return [f"line {first + n}: {_cells(row)} cell borders, the header has {width}"
            for n, row in enumerate(rows) if _cells(row) != width]


@pytest.mark.parametrize("path", DOCUMENTS, ids=IDS)
def test_markdown_renders_as_written(path: Path) -> None:
    assert markdown_problems(path.read_text()) == []


def test_the_markdown_check_catches_what_it_looks_for() -> None:
    assert markdown_problems("```\n$ tlsprobe x\n\ntext\n") == \
        ["line 1: a code fence that is never closed"]
    table = "| a | b |\n| --- | --- |\n| 1 | 2 |\n"
    assert markdown_problems(table) == []
    assert markdown_problems(table + "\nA paragraph.\n| 3 | 4 |\n")[0].startswith(
        "line 6: a table row without a header")
    assert markdown_problems("| a | b |\n| --- | --- |\n| 1 | 2 | 3 |\n") == \
        ["line 3: 4 cell borders, the header has 3"]


#: `path/module.py NAME` in one code span: a function, class or constant of that module
REFERENCE = re.compile(r"`((?:\w+/)*\w+\.py) ([A-Za-z_]\w*)(?:\(\))?`")


def _module_files(path: str) -> list[Path]:
    """The files a document's `path` names: from the root, from tlsprobe/, or any file whose
    path ends with it (`offline/openvpn_channel.py`)."""
    direct = [ROOT / path, ROOT / "tlsprobe" / path]
    found = [p for p in direct if p.is_file()]
    return found or [p for p in ROOT.rglob(Path(path).name)
                     if p.as_posix().endswith("/" + path) and ".venv" not in p.parts]


@pytest.mark.parametrize("path", DOCUMENTS, ids=IDS)
def test_every_module_and_name_the_documents_point_at_exists(path: Path) -> None:
    text = path.read_text()
    wrong = []
    for match in REFERENCE.finditer(text):
        module, name = match.groups()
        line = text.count("\n", 0, match.start()) + 1
        files = _module_files(module)
        if not files:
            wrong.append(f"{path.name}:{line}: {module}: no such module")
        elif not any(re.search(rf"\b{name}\b", f.read_text()) for f in files):
            wrong.append(f"{path.name}:{line}: {module} has no {name}")
    assert wrong == [], "stale code references:\n" + "\n".join(wrong)


def test_schemas_md_names_every_optional_member() -> None:
    """docs/SCHEMAS.md's "Required members" names each member a document may leave out
    (`gate`, `changes` and `baseline` of a scan were missing): the schemas' own list."""
    import json
    text = (ROOT / "docs" / "SCHEMAS.md").read_text()
    bullet = text.split("- **Required members**", 1)[1].split("\n- **", 1)[0]
    named = set(re.findall(r"`(\w+)`", bullet))
    folder = ROOT / "tlsprobe" / "data" / "schemas"
    missing = []
    for name in ("scan", "probe"):
        schema = json.loads((folder / f"{name}.schema.json").read_text())
        optional = set(schema["properties"]) - set(schema["required"])
        missing += [f"{name}: {member}" for member in sorted(optional - named)]
    assert missing == [], "optional members docs/SCHEMAS.md does not name: " + \
        ", ".join(missing)


def exit_code_table() -> dict[int, str]:
    """README's "Exit codes" table: code -> meaning."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    return {int(m[1]): m[2] for m in re.finditer(r"^\| (\d+) \| (.*) \|$", section,
                                                       re.MULTILINE)}


def test_the_exit_code_table_is_the_code_s() -> None:
    """Each code README's table documents is an `EXIT_*` of tlsprobe/errors.py and each
    `EXIT_*` is documented (130, "interrupted", was a bare number in cli.py)."""
    from tlsprobe import errors
    constants = {value for name, value in vars(errors).items()
                 if name.startswith("EXIT_") and isinstance(value, int)}
    table = exit_code_table()
    assert {0, 1, 2, 70, 130} <= set(table)
    assert set(table) == constants, (sorted(set(table) - constants),
                                     sorted(constants - set(table)))


def _line_of(text: str, offset: int) -> str:
    return text[text.rfind("\n", 0, offset) + 1:text.find("\n", offset)]


#: "exit 3", "exits 130", "exit code 7", "(exit 2)": a code tlsprobe ends with
EXIT_MENTION = re.compile(r"\b(?:exits?|[Ee]xit code|exit status)\s+\(?(\d+)\b")


@pytest.mark.parametrize("path", DOCUMENTS, ids=IDS)
def test_every_exit_code_the_documents_name_is_in_the_table(path: Path) -> None:
    """An exit code the documents promise is one README's table explains (another
    program's, such as curl's "exit 35", is named on its line)."""
    table = set(exit_code_table())
    text = path.read_text()
    wrong = [f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}"
             for m in EXIT_MENTION.finditer(text)
             if int(m[1]) not in table and "curl" not in _line_of(text, m.start())]
    assert wrong == [], "exit codes outside README's table:\n" + "\n".join(wrong)


def test_the_policy_files_the_documents_show_load(tmp_path: Path) -> None:
    """docs/POLICY.md's ```toml and ```json blocks are policy files tlsprobe reads as
    written (every key, code and name in them known)."""
    from tlsprobe.policy.load import load_policy
    text = (ROOT / "docs" / "POLICY.md").read_text()
    blocks = re.findall(r"^```(toml|json)\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert sorted(kind for kind, _ in blocks) == ["json", "toml"]
    for number, (kind, body) in enumerate(blocks):
        path = tmp_path / f"example{number}.{kind}"
        path.write_text(body)
        policy = load_policy(str(path))
        assert policy.name, (kind, policy)


def _members(node: object, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        found.update(node.get("properties", {}))
        for value in node.values():
            _members(value, found)
    elif isinstance(node, list):
        for value in node:
            _members(value, found)
    return found


@pytest.mark.parametrize("path", DOCUMENTS, ids=IDS)
def test_json_the_documents_quote_names_real_members(path: Path) -> None:
    """A JSON object quoted in backticks (`{"passed": false, "reasons": [...]}`) parses and
    names members the shipped schemas define."""
    import json

    from tlsprobe.data import schemas
    members: set[str] = set()
    for name in schemas.NAMES:
        _members(schemas.load(name), members)
    text = path.read_text()
    wrong = []
    for match in re.finditer(r"`(\{\".*?\})`", text):
        line = text.count("\n", 0, match.start()) + 1
        try:
            value = json.loads(match[1].replace("[...]", "[]").replace("...", ""))
        except ValueError as exc:
            wrong.append(f"{path.name}:{line}: {match[1]}: {exc}")
            continue
        if re.search(r"`(?:policy_extends)` \($", text[:match.start()]):
            continue    # a map: its keys are data (policy names), not members
        wrong += [f"{path.name}:{line}: {key}" for key in value if key not in members]
    assert wrong == [], "JSON in the documents that the schemas do not define:\n" + \
        "\n".join(wrong)
