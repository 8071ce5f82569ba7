"""Checks and the running of them, for every audited kind: the registry of small checks, each
with an id, a section, a severity and a docstring (`registry`), and the one runner that puts
a package through the integrity gate and a suite's checks into one report (`run`)."""
