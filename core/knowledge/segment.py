"""Text -> search terms that a plain word index can match, in Chinese as in English.

Why pre-segmented text: SQLite's FTS5 tokenizers miss Chinese words (`unicode61` makes
a whole CJK run one token, so 游戏 inside 玩游戏 is never found; `trigram` cannot match
a two-character word at all), and PostgreSQL's `simple` configuration does the same.
So both backends index the terms made here, separated by spaces:
- Latin letters and digits: case-folded words (`ERR-4012` -> `err 4012`);
- a run of CJK characters: its character bigrams and its single characters, so a
  two-character word (游戏) and a one-character query (猫) both match.
A query uses the bigrams of each CJK run (a single character only where the run is one
character), so a question in a sentence finds passages with the same words.
"""

from __future__ import annotations

import re
import unicodedata

# CJK ideographs, kana and hangul: scripts written without spaces between words.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ebef"
_RUNS = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)")
_CJK_RUN = re.compile(rf"[{_CJK}]+")
MAX_QUERY_TERMS = 64
# Words a question is made of but an answer is not: dropped from queries (never from the
# index), so a passage that only shares "how do I" with the question does not outrank
# the one the vector search found. A query of nothing else keeps them.
QUESTION_WORDS = frozenset(
    "a an the is are was were be do does did i you we my your me it its of to in on at for "
    "and or with what when where who whom which why how can could should would will there "
    "this that these those any some from by about get has have had if so than then".split()
    + "什么 怎么 多少 哪里 哪儿 为什 为何 是不 不是 可以 能不 么时 时候 一下 请问 的是 了吗 是什 "
    "要多 多久 几天 几点 有什 么样".split()
)


def _normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_terms(text: str) -> str:
    """The terms of a passage as one space-separated string for the keyword index."""
    out: list[str] = []
    for cjk, word in _RUNS.findall(_normal(text)):
        if cjk:
            out.extend(_bigrams(cjk))
            if len(cjk) > 1:
                out.extend(cjk)
        else:
            out.append(word)
    return " ".join(t for t in out if t)


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, in order, at most MAX_QUERY_TERMS of them."""
    seen: dict[str, None] = {}
    for cjk, word in _RUNS.findall(_normal(text)):
        for term in _bigrams(cjk) if cjk else [word]:
            if term:
                seen.setdefault(term, None)
    kept = [t for t in seen if t not in QUESTION_WORDS] or list(seen)
    return kept[:MAX_QUERY_TERMS]


def estimate_tokens(text: str) -> int:
    """A quick token estimate for chunking and budgets: a CJK character is about one token,
    a Latin word about four thirds (what the usual BPE vocabularies give on average)."""
    cjk = sum(len(run) for run in _CJK_RUN.findall(text))
    words = len(re.findall(r"[^\W_]+", _CJK_RUN.sub(" ", text)))
    punct = len(re.findall(r"[^\w\s]", text))
    return cjk + (words * 4 + 2) // 3 + punct // 2


def cjk_share(text: str) -> float:
    """The share of CJK characters among a text's letters and digits (0 for none)."""
    cjk = sum(len(run) for run in _CJK_RUN.findall(text))
    other = sum(1 for ch in _CJK_RUN.sub("", text) if ch.isalnum())
    return cjk / (cjk + other) if cjk + other else 0.0
