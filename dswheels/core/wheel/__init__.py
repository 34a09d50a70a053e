"""One DeepSpeed wheel: what is inside it, its manifest, and whether it is right.

:mod:`.contents` reads and rewrites what is inside, :mod:`.manifest` is the JSON beside each
wheel, :mod:`.verify` checks a wheel without installing it, :mod:`.opload`, :mod:`.dsreport`
and :mod:`.smoke` judge what an installed wheel does, and :mod:`.inspect` describes any
DeepSpeed wheel, ours or not.
"""
