"""Apply an audit's one-line patch to a production function, as the auditor applied it to the source."""

import inspect
import textwrap


def patched(module, name: str, old: str, new: str):
    """``module.name`` rebuilt from its own source with the one edit ``old`` -> ``new``, in the module's namespace
    (the edit must occur exactly once, so a patch that no longer matches the source fails loudly)."""
    source = textwrap.dedent(inspect.getsource(getattr(module, name)))
    assert source.count(old) == 1, (name, old)
    namespace = dict(vars(module))
    exec(compile(source.replace(old, new), f"<patched {module.__name__}.{name}>", "exec"), namespace)
    return namespace[name]
