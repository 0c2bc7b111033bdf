"""The attention explorer: a local web page that runs a checkpoint on what a user types and draws every
layer's and head's attention (§3.2) beside the model's output.

    scratchformer explore --ckpt runs/copy            # then open http://127.0.0.1:8000/
    scratchformer explore --ckpt runs/copy --text abcdefg --export view.html     # or view.png, view.svg

``model_view`` turns one input into the JSON-able numbers (tokens, attention maps, next-token
probabilities, a translation, class probabilities); ``server`` serves them and the page in ``static/``
(plain HTML, CSS and JavaScript that ship with the package: no network, no build step); ``standalone``
writes that page as one file with the numbers inside, and ``export`` is ``--export``.
"""

from scratchformer.app.explore.export import export_view
from scratchformer.app.explore.model_view import Limits, RequestError, explore, model_info, parse_request
from scratchformer.app.explore.server import ExploreServer, make_server, serve
from scratchformer.app.explore.standalone import standalone_page

__all__ = ["ExploreServer", "Limits", "RequestError", "explore", "export_view", "make_server", "model_info",
           "parse_request", "serve", "standalone_page"]
