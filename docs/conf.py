# Sphinx configuration of the docs site: `make docs` builds docs/_build/html.
#
# Sphinx rather than MkDocs (docs/index.md, "About these docs", says why):
# autodoc renders the API reference from the docstrings, MyST reads the
# existing Markdown pages, and `-W` makes every warning (a broken reference,
# a missing page) a build failure. No intersphinx: the build runs without a
# network, so torch's own objects are named, not linked. The theme is
# pydata-sphinx-theme, the base of PyTorch's own theme.
import importlib.util
import os
import sys

# The checkout's package only where none is installed: a run against another torch
# (scripts/test_torch_version.py) puts the package built for that torch first on the path.
if importlib.util.find_spec("torch_neuron_sim") is None:
    sys.path.insert(0, os.path.abspath(".."))
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")

import torch  # noqa: E402
import torch_neuron_sim  # noqa: E402,F401  (registers torch.neuron for autodoc)

project = "torch-neuron-sim"
author = "torch-neuron-sim contributors"
release = torch_neuron_sim.__version__
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # "#2-the-64-bit-rule" links inside pages resolve
myst_enable_extensions = ["colon_fence"]
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
nitpicky = False

html_theme = "pydata_sphinx_theme"
html_title = "torch-neuron-sim"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2,
                      "secondary_sidebar_items": ["page-toc"], "footer_start": ["copyright"]}
html_context = {"default_mode": "light"}  # the theme logs a console error when no mode is stored yet
html_static_path = ["_static"] if os.path.isdir(os.path.join(os.path.dirname(__file__), "_static")) else []
