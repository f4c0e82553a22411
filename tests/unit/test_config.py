"""Unit tests of storm_queue.core.config: absent, valid and malformed declarations."""

from __future__ import annotations

import pytest

from storm_queue.core import config
from storm_queue.store.directory import declared


def test_absent_file_declares_no_source(tmp_path):
    d = declared.load(str(tmp_path))
    assert d.present is False
    assert d.sources == ()
    assert d.log == "priority.log"
    assert d.error is None and d.log_error is None and d.sources_error is None


def test_empty_file_is_present_with_defaults(tmp_path):
    (tmp_path / "storm.toml").write_text("")
    d = declared.load(str(tmp_path))
    assert d.present is True
    assert d.sources == () and d.log == "priority.log" and d.error is None


def test_valid_sources_and_log(tmp_path):
    (tmp_path / "storm.toml").write_text(
        '# reviewed\n[priority]\nsources = ["nightly-triage", "ci.bot_2"]\nlog = "state/prio.log"\n'
    )
    d = declared.load(str(tmp_path))
    assert d.present
    assert d.sources == ("nightly-triage", "ci.bot_2")
    assert d.log == "state/prio.log"
    assert d.error is None


def test_unrelated_tables_are_ignored(tmp_path):
    (tmp_path / "storm.toml").write_text('[runner]\nparallel = 2\n[priority]\nsources = ["a"]\n')
    assert declared.load(str(tmp_path)).sources == ("a",)


@pytest.mark.parametrize("text", ["[priority\n", "sources = [\n", "x = = 1\n", '[priority]\nsources = ["a",\n'])
def test_invalid_toml_is_log_error(tmp_path, text):
    (tmp_path / "storm.toml").write_text(text)
    d = declared.load(str(tmp_path))
    assert d.present
    assert d.log_error is not None and "storm.toml" in d.log_error
    assert d.error == d.log_error
    assert d.sources == ()


def test_not_utf8_is_log_error(tmp_path):
    (tmp_path / "storm.toml").write_bytes(b'[priority]\nsources = ["\xff"]\n')
    d = declared.load(str(tmp_path))
    assert d.log_error is not None


def test_priority_not_a_table_is_log_error():
    d = config.parse("priority = 3\n")
    assert d.log_error is not None


@pytest.mark.parametrize(
    "value",
    ['"nightly"', "3", "true", '{ a = "b" }', '["ok", 3]', '[["nested"]]'],
)
def test_sources_not_a_list_of_names_is_sources_error_with_log_known(value):
    d = config.parse(f'[priority]\nlog = "p.log"\nsources = {value}\n')
    assert d.present
    assert d.log_error is None
    assert d.sources_error is not None
    assert d.error == d.sources_error
    assert d.log == "p.log"
    assert d.sources == ()


@pytest.mark.parametrize("bad", ["operator", "../x", "a*", "x;y", "-a", ".hidden", "", "a..b", "x" * 201])
def test_sources_with_reserved_or_invalid_name_is_sources_error(bad):
    d = config.parse(f'[priority]\nsources = ["fine", {bad!r}]\n'.replace("'", '"'))
    assert d.log_error is None
    assert d.sources_error is not None
    assert d.log == "priority.log"
    assert d.sources == ()


def test_operator_is_named_in_the_error():
    d = config.parse('[priority]\nsources = ["operator"]\n')
    assert "operator" in d.sources_error


@pytest.mark.parametrize("value", ['"../p.log"', '"/etc/p.log"', '"a//b"', '"x;y"', "3", '["p.log"]', '""', '"dir/"'])
def test_bad_log_key_is_log_error(value):
    d = config.parse(f"[priority]\nlog = {value}\n")
    assert d.log_error is not None
    assert d.error == d.log_error


def test_bad_log_key_hides_sources_even_when_they_are_valid():
    d = config.parse('[priority]\nlog = "../x"\nsources = ["a"]\n')
    assert d.log_error is not None
    assert d.sources == ()


def test_a_syntax_error_too_far_below_its_statement_says_the_mistake_may_be_above():
    """Issue 13 item 9: the search for a statement's first line is bounded;
    past the bound the message says the parser's line may not be the one."""
    text = "[priority]\nsources = [\n" + '"bot",\n' * 40_000 + "x\n"
    decl = config.parse(text)
    assert decl.log_error == ("storm.toml is not valid TOML: Invalid value at line 40003, column 1, where the parser "
                              "stopped; the mistake may be on an earlier line, inside a value that starts above it")


def test_a_syntax_error_the_parser_cannot_place_is_said_as_it_is():
    assert config.syntax_error("x", "Something odd") == "storm.toml is not valid TOML: Something odd"


def test_the_backoff_keys_default_to_none_and_are_read() -> None:
    """[runner] retry_delay (0: no backoff, the default) and retry_max (default 600), issue 33 item 1."""
    assert (config.parse("").runner.retry_delay, config.parse("").runner.retry_max) == (0, 600)
    policy = config.parse("[runner]\nretry_delay = 0\nretry_max = 1\n").runner
    assert (policy.retry_delay, policy.retry_max) == (0, 1)
    policy = config.parse("[runner]\nretry_delay = 30\nretry_max = 3600\n").runner
    assert (policy.retry_delay, policy.retry_max) == (30, 3600)
    assert config.parse("[runner]\nretry_delay = 30\n").notes == ()  # a known key, not a typo


@pytest.mark.parametrize(("text", "words"), [
    ("retry_delay = -1", "[runner] retry_delay must be a whole number from 0 to"),
    ("retry_delay = 1.5", "[runner] retry_delay must be a whole number from 0 to"),
    ("retry_delay = true", "[runner] retry_delay must be a whole number from 0 to"),
    ("retry_delay = \"30s\"", "[runner] retry_delay must be a whole number from 0 to"),
    ("retry_max = 0", "[runner] retry_max must be a whole number from 1 to"),
    ("retry_max = 999999999999", "[runner] retry_max must be a whole number from 1 to"),
])
def test_a_bad_backoff_key_refuses_every_request(text: str, words: str) -> None:
    decl = config.parse(f"[runner]\n{text}\n")
    assert decl.sources_error is not None and words in decl.sources_error, decl.sources_error
