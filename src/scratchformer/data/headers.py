"""One rule for header rows, used by every tabular format (labelled text, parallel sentences).

A first row is a header when every one of its cells is a column *name* rather than data: a text column
is named like ``text``, ``sentence``, ``source``, ``target`` (or, for parallel data, by a language: ``de``,
``en_US``, ``english``); a label column like ``label``, ``class``, ``sentiment``. Both cells of a parallel
header must differ (``de<TAB>en``), so a real first pair such as ``no<TAB>no`` stays data. The readers say
when they skip a header, so a wrong guess is visible at the start of a run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["is_header"]

TEXT_NAMES = {"text", "texts", "sentence", "sentences", "source", "target", "src", "tgt", "input", "output",
              "review", "document", "content", "question", "utterance", "translation"}
LABEL_NAMES = {"label", "labels", "class", "category", "sentiment", "polarity", "target", "y", "tag", "intent"}
# ISO 639-1 codes (and a few common language names), for headers such as "de<TAB>en".
LANGUAGE_CODES = set(
    "aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv dz "
    "ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig ii ik "
    "io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml "
    "mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd "
    "se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi "
    "vo wa wo xh yi yo za zh zu".split())
LANGUAGE_NAMES = {"english", "german", "french", "spanish", "italian", "portuguese", "dutch", "russian",
                  "chinese", "japanese", "korean", "arabic", "czech", "polish", "turkish", "romanian"}
_REGION = re.compile(r"^([a-z]{2})[-_][a-z]{2}$")  # en_US, pt-BR


def _is_language(cell: str) -> bool:
    match = _REGION.match(cell)
    return cell in LANGUAGE_CODES or cell in LANGUAGE_NAMES or bool(match and match.group(1) in LANGUAGE_CODES)


def is_header(cells: Sequence[str], columns: Sequence[str]) -> bool:
    """Whether a first row ``cells`` names its columns. ``columns`` says what each column holds:
    ``("text", "label")`` for labelled text, ``("text", "text")`` for parallel sentences."""
    if len(cells) != len(columns):
        return False
    names = [c.strip().lower() for c in cells]
    for name, kind in zip(names, columns):
        if kind == "label" and name not in LABEL_NAMES:
            return False
        if kind == "text" and name not in TEXT_NAMES and not (len(columns) > 1 and "label" not in columns
                                                              and _is_language(name)):
            return False
    return not (list(columns).count("text") > 1 and len(set(names)) < len(names))
