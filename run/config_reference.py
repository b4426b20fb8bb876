"""The config's reference, made from the schema itself (run/config.py: each field's
docstring is its description, each section's class docstring its summary): a config
as YAML with what each key means above it (``tengen config show``), the JSON Schema
for editors (``tengen config schema``), and docs/config.md (``tengen config
reference``, which a test keeps in step with the schema).
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import yaml
from pydantic import BaseModel

from tengen.run.config import TengenConfig

__all__ = ["annotated_yaml", "json_schema", "reference_markdown"]

_WIDTH = 88


def _sections() -> list[tuple[str, type[BaseModel] | None, Any]]:
    """(key, the section's model or None for a top-level value, its field info)."""
    out = []
    for name, info in TengenConfig.model_fields.items():
        model = info.annotation if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel) \
            else None
        out.append((name, model, info))
    return out


def _plain(text: str | None) -> str:
    """A docstring's words on one line, its ``code`` as Markdown's `code`."""
    return " ".join((text or "").split()).replace("``", "`")


def _first_paragraph(doc: str | None) -> str:
    return _plain((doc or "").strip().split("\n\n")[0])


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(_plain(text), _WIDTH - len(indent) - 2,
                                                          break_on_hyphens=False)]


def _yaml_value(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("\n...").strip()


def annotated_yaml(config: TengenConfig) -> str:
    """``config`` as YAML, every default spelled out, each section and key with what it
    means in a comment above it (still YAML: a start for a config of one's own)."""
    data = config.model_dump(mode="json")
    lines: list[str] = []
    for name, model, info in _sections():
        if lines:
            lines.append("")
        if model is None:
            lines += _comment(info.description or "", "")
            lines.append(f"{name}: {_yaml_value(data[name])}")
            continue
        lines += _comment(_first_paragraph(model.__doc__), "")
        lines.append(f"{name}:")
        for key, field in model.model_fields.items():
            lines += _comment(field.description or "", "  ")
            lines.append(f"  {key}: {_yaml_value(data[name][key])}")
    return "\n".join(lines) + "\n"


def json_schema() -> str:
    """The config's JSON Schema (draft 2020-12, as pydantic writes it), for editors."""
    schema = TengenConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "tengen run config"
    return json.dumps(schema, indent=2) + "\n"


def _cell(text: str) -> str:
    return _plain(text).replace("|", "\\|")


def reference_markdown() -> str:
    """docs/config.md: every key of every section, its default and what it means."""
    defaults = TengenConfig.model_validate({"game": {"name": "tictactoe"}}).model_dump(mode="json")
    out = ["# The run config", "",
           "Every key of a run config (`tengen train CONFIG`), its default and what it means: made from the "
           "schema (run/config.py) by `tengen config reference`, and kept in step with it by "
           "tests/test_config_reference.py. `tengen config show NAME` prints a config with these notes; "
           "`tengen config schema` prints the JSON Schema for an editor; `tengen train --set KEY=VALUE` "
           "sets any key for one run.", ""]
    top = [(name, info) for name, model, info in _sections() if model is None]
    for name, model, _ in _sections():
        if model is None:
            continue
        out += [f"## {name}", "", _first_paragraph(model.__doc__), "", "| key | default | meaning |", "|---|---|---|"]
        for key, field in model.model_fields.items():
            default = "(required)" if field.is_required() else _yaml_value(defaults[name][key])
            out.append(f"| `{name}.{key}` | `{_cell(default)}` | {_cell(field.description or '')} |")
        out.append("")
    out += ["## Top-level keys", "", "| key | default | meaning |", "|---|---|---|"]
    for name, info in top:
        out.append(f"| `{name}` | `{_cell(_yaml_value(defaults[name]))}` | {_cell(info.description or '')} |")
    return "\n".join(out) + "\n"
