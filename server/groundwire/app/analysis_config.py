"""Lexical analysis configuration of an index (domain/analysis.py).

TOML shape (inside `[indexes.NAME]`; every key optional):

    [indexes.docs.analysis]
    language = "english"      # a Snowball language: stemming and the standard stop list
    stemming = true           # reduce plain words to their stem ("policies" -> "polici")
    stop_words = "standard"   # "standard" (the language's list), "none", or "file"
    stop_words_file = "stop.txt"  # with stop_words = "file": one word per line, "#" comments

Identifiers (POL-HR-014, IRagRetriever, CS1503) and numbers are never stemmed or
dropped, whatever the configuration. Changing any of these keys changes the index's
chunking descriptor: the next ingestion rebuilds the index (a full re-ingestion).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import field_validator, model_validator

from groundwire.app.config_base import StrictModel
from groundwire.domain.analysis import (
    ENGLISH_STOP_WORDS,
    STEMMER_LANGUAGES,
    Analyzer,
    stop_words_digest,
)

# A stop word file is read whole at start-up: bounded.
MAX_STOP_WORD_FILE_BYTES = 1024 * 1024
MAX_STOP_WORDS = 20_000

StopWords = Literal["standard", "none", "file"]


class AnalysisConfig(StrictModel):
    language: str = "english"
    stemming: bool = True
    stop_words: StopWords = "standard"
    stop_words_file: Path | None = None

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        lowered = value.strip().lower()
        if lowered not in STEMMER_LANGUAGES:
            raise ValueError(f"unknown language {value!r}; one of: {', '.join(STEMMER_LANGUAGES)}")
        return lowered

    @model_validator(mode="after")
    def _file(self) -> AnalysisConfig:
        if (self.stop_words == "file") != (self.stop_words_file is not None):
            raise ValueError("stop_words_file is required with stop_words = 'file' and only then")
        if self.stop_words == "standard" and not standard_stop_words_available(self.language):
            raise ValueError(
                f"stop_words: no standard stop word list for {self.language!r};"
                " use 'none' or 'file'"
            )
        return self


def standard_stop_words_available(language: str) -> bool:
    if language == "english":
        return True
    from stop_words import AVAILABLE_LANGUAGES

    return language in AVAILABLE_LANGUAGES


def _standard_stop_words(language: str) -> frozenset[str]:
    if language == "english":
        return ENGLISH_STOP_WORDS
    # Lists shipped inside the `stop-words` package (read from its own files).
    from stop_words import get_stop_words

    return frozenset(w.strip().lower() for w in get_stop_words(language) if w.strip())


def read_stop_word_file(path: Path) -> frozenset[str]:
    """One word per line, blank lines and "#" comments ignored, lower-cased.
    Raises ValueError with a reason that names no path content."""
    try:
        size = path.stat().st_size
        if size > MAX_STOP_WORD_FILE_BYTES:
            raise ValueError(f"stop word file exceeds {MAX_STOP_WORD_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read stop word file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError("stop word file is not UTF-8 text") from None
    words: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        word = line.split("#", 1)[0].strip().lower()
        if not word:
            continue
        if len(word.split()) != 1:
            raise ValueError(f"stop word file line {number}: one word per line")
        words.add(word)
    if len(words) > MAX_STOP_WORDS:
        raise ValueError(f"stop word file holds more than {MAX_STOP_WORDS} words")
    return frozenset(words)


def build_analyzer(config: AnalysisConfig) -> Analyzer:
    """The index's analyzer (reads the stop word file, if any: ValueError on failure)."""
    if config.stop_words == "none":
        stop: frozenset[str] = frozenset()
        source = "none"
    elif config.stop_words == "standard":
        stop = _standard_stop_words(config.language)
        source = config.language
    else:
        assert config.stop_words_file is not None
        stop = read_stop_word_file(config.stop_words_file)
        source = f"file:{stop_words_digest(stop)}"
    return Analyzer(config.language, config.stemming, stop, source)


__all__ = ["AnalysisConfig", "build_analyzer", "read_stop_word_file"]
