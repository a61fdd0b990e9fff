# Sphinx configuration of the reader's edition (copied into the generated source folder by
# ``python -m litrepro.book``).  The notebooks are shown as committed in rendered/: never executed.
# Nothing is loaded from another host: MathJax is served from _static/mathjax (a copy from the
# django-static-mathjax wheel), and MyST-NB's ipywidgets scripts (require.js, the widget manager,
# both from a CDN) are switched off.

project = "litrepro"
author = "litrepro"
copyright = "litrepro"
extensions = ["myst_nb"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "_extra"]
# Source and test files the trust report links to, copied verbatim to files/ of the site.
html_extra_path = ["_extra"]

# MyST-NB: read the rendered notebooks as they are.
nb_execution_mode = "off"
nb_ipywidgets_js = {}
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 4

# Offline MathJax 3 (relative to _static; MathJax finds its fonts and extensions beside its script).
mathjax_path = "mathjax/tex-mml-chtml.js"

html_theme = "sphinx_book_theme"
html_title = "litrepro: the reader's edition"
html_static_path = ["_static"]
html_css_files = ["litrepro-book.css"]
html_js_files = ["litrepro-book.js"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    # The trust report's wide table gets the right-hand column too.
    "secondary_sidebar_items": {"**": ["page-toc"], "trust": []},
}
