"""``dswheels verify`` and ``dswheels inspect``: a wheel proven before anyone installs it, and what any DeepSpeed
wheel holds. Pure judgements here; reading and installing in :mod:`.effects`; entry :mod:`.step`.
"""
