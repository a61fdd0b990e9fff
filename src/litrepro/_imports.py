"""Import-time shim for the batch pipeline's processes (runner, worker).

``nbformat`` imports ``jsonschema``, which imports the optional
``rfc3987_syntax`` when it is installed (JupyterLab's dependencies install
it).  That package compiles an Earley grammar at import, a cost paid by every worker
process (seconds on our 2-core machine; not timed in a committed file).  The notebook schema uses no
``iri`` format, the only thing that package validates, so the pipeline's
processes mark it as absent; ``jsonschema`` then skips that one format
checker, as it does when the package is not installed.  Kernels and JupyterLab
are unaffected.
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]
