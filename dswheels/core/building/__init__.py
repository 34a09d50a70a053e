"""What a DeepSpeed wheel build needs and says: its environment, source patches, log and summary.

Pure: :mod:`dswheels.effects.build` finds the tools and runs the build; the modules here
spell the plan's decisions the way DeepSpeed's ``setup.py`` and torch's ``cpp_extension``
read them, and read the build's output back.
"""
