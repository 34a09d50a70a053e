"""The command line's parts every stage's command shares: help formatting, registering a command, and the flags
more than one command takes (:mod:`.shared`), each defined once.
"""
