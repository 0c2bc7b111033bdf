"""The explorer's page as one self-contained HTML file: ``explore --export view.html`` and the page's Export button.

The served page (``static/index.html``) links its styles and two scripts; this writes the same page with them
inside it and the numbers of the given inputs in a JSON block (``<script type="application/json"
id="explore-data">``) that ``explore.js`` reads instead of asking the server. So the file opens from the disk
(``file://``), offline, with the same views and controls; its content security policy allows only its own
inline script and styles (by their sha256), images from ``data:`` URLs and no connection at all::

    {"format": "scratchformer-explore/1", "info": model_info(...), "results": [explore(...), ...],
     "initial": {"kind": ..., "layer": ..., "head": ...} or null}
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from importlib import resources
from typing import Any

FORMAT = "scratchformer-explore/1"
SCRIPTS = ("figures.js", "lens.js", "explore.js")  # in the order index.html loads them
_STYLE_LINK = '<link rel="stylesheet" href="/explore.css">'
_SCRIPT_TAG = re.compile(r'<script src="/(?P<name>[\w.-]+\.js)" defer></script>')


def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def embedded_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` (which could
    close the element or open a comment), no line separators U+2028/2029."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def standalone_page(info: dict[str, Any], results: list[dict[str, Any]],
                    initial: dict[str, Any] | None = None) -> str:
    """The explorer's page with its styles, scripts and ``results`` (``model_view.explore``'s answers, at
    least one) inside it. ``initial``: the view it opens on (``kind``, ``layer``, ``head``), or None for the
    page's own choice. The same arguments give the same file, byte for byte."""
    if not results:
        raise ValueError("an exported page needs at least one input")
    page = _static("index.html")
    style = _static("explore.css")
    scripts = {name: _static(name) for name in SCRIPTS}
    for name, text in scripts.items():
        if "</script" in text.lower():
            raise ValueError(f"{name} contains '</script', which would end its inline element")
    data = {"format": FORMAT, "info": info, "results": results, "initial": initial}
    policy = ("default-src 'none'; " + f"script-src {' '.join(_sha256(t) for t in scripts.values())}; "
              f"style-src {_sha256(style)}; img-src data:; base-uri 'none'; form-action 'none'")
    if page.count(_STYLE_LINK) != 1 or [m["name"] for m in _SCRIPT_TAG.finditer(page)] != list(SCRIPTS):
        raise ValueError("static/index.html does not link explore.css and the scripts as standalone_page expects")
    head = (f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
            f"  <style>{style}</style>\n"
            f'  <script type="application/json" id="explore-data">{embedded_json(data)}</script>')
    page = page.replace(_STYLE_LINK, head)
    return _SCRIPT_TAG.sub(lambda m: f"<script>{scripts[m['name']]}</script>", page)


__all__ = ["FORMAT", "SCRIPTS", "embedded_json", "standalone_page"]
