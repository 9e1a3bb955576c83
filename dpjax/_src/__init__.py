"""dpjax's implementation. Nothing here is public API: import from the public faces (``dpjax``,
``dpjax.selection``, ``dpjax.quantiles``, ...), which re-export what users call.

Inside ``_src`` names are ordinary (no leading underscore for a helper another module uses); a
module's own helpers are underscored and never imported by another module.
"""
