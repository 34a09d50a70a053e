"""``dswheels smoke``: a tiny model trained through ``deepspeed.initialize`` with the wheel, per config.
Pure: :mod:`.runs`; the training in :mod:`.effects`; entry :mod:`.step`; its command in :mod:`dswheels.cli`.
"""
