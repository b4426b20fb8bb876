"""The config's reference comes from the schema, one home (run/config_reference.py):
every key says what it means, `tengen config show` is YAML that reads back to the
same config, the JSON Schema validates the packaged configs, and docs/config.md is
what `tengen config reference` makes now."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tengen.run.config import TengenConfig, load_config, packaged_configs, parse_config
from tengen.run.config_reference import annotated_yaml, json_schema, reference_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_every_key_says_what_it_means():
    sections = [info.annotation for info in TengenConfig.model_fields.values()
                if isinstance(info.annotation, type) and issubclass(info.annotation, TengenConfig.__base__)]
    assert len(sections) >= 10
    for section in sections:
        assert section.__doc__ and section.__doc__.strip(), section
        for key, field in section.model_fields.items():
            assert field.description and len(field.description) > 10, f"{section.__name__}.{key}"
    for key, info in TengenConfig.model_fields.items():
        assert info.annotation in sections or info.description, key


@pytest.mark.parametrize("name", sorted(packaged_configs()))
def test_config_show_is_yaml_that_reads_back_to_the_same_config(name):
    config = load_config(name)
    text = annotated_yaml(config)
    assert parse_config(yaml.safe_load(text)) == config
    assert "# the search budget: simulations (visits added at the root) per move\n  simulations:" in text


def test_the_json_schema_validates_the_packaged_configs_and_refuses_a_typo():
    schema = json.loads(json_schema())
    for path in packaged_configs().values():
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError, match="simulation"):
        jsonschema.validate({"game": {"name": "go"}, "mcts": {"simulation": 3}}, schema)


def test_docs_config_md_is_the_reference_the_schema_makes_now():
    assert (ROOT / "docs" / "config.md").read_text() == reference_markdown(), \
        "regenerate it: tengen config reference > docs/config.md"
    done = subprocess.run([sys.executable, "-m", "tengen.cli", "config", "reference"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout == reference_markdown()
