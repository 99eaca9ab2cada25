"""What the schema tests share: the shipped schemas as validators, and one assertion that
names every way a document breaks its schema (not only the first)."""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema

from tlsprobe.data import schemas


@cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    """The validator of the shipped schema `name` (checked as a draft 2020-12 schema first),
    with formats (date-time) checked."""
    schema = schemas.load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema,
                                           format_checker=jsonschema.Draft202012Validator
                                           .FORMAT_CHECKER)


def errors(name: str, document: Any) -> list[str]:
    """Every violation of schema `name` by `document`, one line each (path: message)."""
    found = validator(name).iter_errors(document)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}"
            for e in sorted(found, key=lambda e: list(map(str, e.absolute_path)))]


def assert_valid(name: str, document: Any, what: str = "") -> None:
    """Fail naming each violation: the JSON changed and tools/gen_schemas.py was not re-run
    (or the generator does not describe the change yet)."""
    problems = errors(name, document)
    assert problems == [], (f"{what or name} does not match tlsprobe/data/schemas/"
                            f"{name}.schema.json (re-run tools/gen_schemas.py):\n"
                            + "\n".join(problems[:20]))
